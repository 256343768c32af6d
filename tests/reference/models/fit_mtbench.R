# Frozen glmer reference on real data: the MT-Bench AB/BA judge table in ../shared/data.
# Recodes the raw CSV itself (independent of evalmix's coding) and fits evalmix's default
# model for it. Writes reference_mtbench.csv and sessionInfo_mtbench.txt.
#   Rscript tests/reference/models/fit_mtbench.R (from any folder; ~1 min; needs ../shared)
suppressPackageStartupMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
path <- "../../../../shared/data/judging_the_judges/jtj_MTBench_position_bias.csv"
d <- read.csv(path, stringsAsFactors = FALSE)
d <- d[!is.na(d$outcome) & d$outcome != "", ]
# response: the evaluated output (model_b) wins; ties count 1/2 (evalmix ties = "half")
d$y <- ifelse(d$outcome == "b", 1, ifelse(d$outcome == "a", 0, 0.5))
# treatment coding, reference = first level in C-locale order (Python's sorted())
d$condition <- factor(d$model_b, levels = sort(unique(d$model_b), method = "radix"))
# +1/2 when model_b's answer was shown first
d$position <- ifelse(d$first_shown == "b", 0.5, -0.5)
d$item <- factor(d$item_id)
d$category <- factor(d$item_group)
d$judge <- factor(d$judge)
t0 <- Sys.time()
m <- suppressWarnings(glmer(
  y ~ condition + position + (1 | item) + (1 | category) + (1 | judge) +
    (0 + position | judge),
  data = d, family = binomial, control = glmerControl(optimizer = "bobyqa")))
secs <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
fe <- data.frame(kind = "fixed", term = names(fixef(m)), estimate = unname(fixef(m)),
                 se = unname(sqrt(diag(as.matrix(vcov(m))))))
vc <- as.data.frame(VarCorr(m))
vc$grp <- sub("\\.[0-9]+$", "", vc$grp)
vc <- data.frame(kind = "sd", term = ifelse(is.na(vc$var1) | vc$var1 == "(Intercept)",
                                            vc$grp, paste0(vc$var1, "|", vc$grp)),
                 estimate = vc$sdcor, se = NA)
fit <- data.frame(kind = "fit", term = c("nobs", "logLik", "seconds", "singular"),
                  estimate = c(nobs(m), as.numeric(logLik(m)), secs, isSingular(m)), se = NA)
write.csv(rbind(fe, vc, fit), "reference_mtbench.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_mtbench.txt")
print(rbind(fe, vc, fit))
