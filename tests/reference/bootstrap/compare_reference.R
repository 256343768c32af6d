# Pairwise differences of condition means, y ~ 0 + condition, clustered by item:
# CR2 (clubSandwich::vcovCR) with Satterthwaite df from linear_contrast(), CR1
# (sandwich::vcovCL HC1) and CR3 (clubSandwich).
# Run: Rscript tests/reference/bootstrap/compare_reference.R (from any folder)
suppressPackageStartupMessages({library(clubSandwich); library(sandwich); library(jsonlite)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv(file.path(here, "compare_scores.csv"))
d$condition <- factor(d$condition)
fit <- lm(y ~ 0 + condition, data = d)
C <- rbind(c(-1, 1, 0), c(-1, 0, 1), c(0, -1, 1))  # beta-alpha, gamma-alpha, gamma-beta
out <- list(estimate = as.vector(C %*% coef(fit)))
for (type in c("CR2", "CR3")) {
  V <- vcovCR(fit, cluster = d$item, type = type)
  lc <- linear_contrast(fit, vcov = V, contrasts = C, test = "Satterthwaite",
                        p_values = TRUE)
  out[[type]] <- list(se = lc$SE, df = lc$df, lo = lc$CI_L, hi = lc$CI_U, p = lc$p_val)
}
V1 <- vcovCL(fit, cluster = ~item, type = "HC1", cadjust = TRUE)
out$CR1 <- list(se = sqrt(diag(C %*% V1 %*% t(C))))
write_json(out, file.path(here, "compare_reference.json"), digits = NA, auto_unbox = TRUE,
           pretty = TRUE)
