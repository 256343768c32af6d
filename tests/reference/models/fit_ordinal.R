## Frozen reference for the ordinal (cumulative logit) model of score tables.
## Run: Rscript tests/reference/models/fit_ordinal.R (from any folder; needs r-cran-ordinal)
## Reads ordinal_scores.csv (make_ordinal_scores.py); writes reference_ordinal.csv:
##   kind (threshold | fixed | sd), term, estimate, se
## clmm: logit P(Y <= k) = theta_k - x'beta - u_item - u_judge (Laplace approximation).
suppressPackageStartupMessages(library(ordinal))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
options(digits = 12)
d <- read.csv("ordinal_scores.csv")
d$score <- factor(d$score, ordered = TRUE)
d$model <- factor(d$model)
fit <- clmm(score ~ model + (1 | item) + (1 | judge), data = d, link = "logit",
            Hess = TRUE, nAGQ = 1)
co <- summary(fit)$coefficients
vc <- sapply(VarCorr(fit), function(v) sqrt(v[1, 1]))
th <- names(fit$alpha)
out <- rbind(
  data.frame(kind = "threshold", term = th, estimate = unname(fit$alpha),
             se = unname(co[th, "Std. Error"])),
  data.frame(kind = "fixed", term = names(fit$beta), estimate = unname(fit$beta),
             se = unname(co[names(fit$beta), "Std. Error"])),
  data.frame(kind = "sd", term = names(vc), estimate = unname(vc), se = NA))
write.csv(out, "reference_ordinal.csv", row.names = FALSE)
cat(sprintf("ordinal %s, R %s\n", packageVersion("ordinal"), getRversion()),
    file = "sessionInfo_ordinal.txt")
print(out)
