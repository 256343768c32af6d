# Frozen lmer references for evalmix.gstudy's REML path on an unbalanced real file:
# Judging the Judges, MT-Bench repetition (../shared/data), unparsed verdicts dropped.
# Score: the evaluated model (model_b) beats the baseline (1), tie 1/2, loses (0).
# G study: object model_b, facets item x judge (crossed); the 2 orders x 3 runs of a
# cell are its replicates (the residual). Two fits: all 9 judges (28 verdicts dropped)
# and 3 judges (claude-3-sonnet-20240229, gpt-3.5-turbo-0125 with 22 of the unparsed
# verdicts, gpt-4-0613: 23 dropped), the fast test's. Writes reference_reml_jtj.csv and
# sessionInfo_reml_jtj.txt.
#   Rscript tests/reference/gtheory/reml_jtj.R (from any folder; ~15 s; needs ../shared)
suppressPackageStartupMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
path <- "../../../../shared/data/judging_the_judges/jtj_MTBench_repetition.csv"
raw <- read.csv(path, stringsAsFactors = FALSE)
raw <- raw[!is.na(raw$outcome) & raw$outcome != "", ]
raw$y <- ifelse(raw$outcome == "b", 1, ifelse(raw$outcome == "a", 0, 0.5))
three <- c("claude-3-sonnet-20240229", "gpt-3.5-turbo-0125", "gpt-4-0613")
fit_one <- function(d, subset) {
  d$model <- factor(d$model_b)
  d$item <- factor(d$item_id)
  d$judge <- factor(d$judge)
  t0 <- Sys.time()
  m <- lmer(y ~ 1 + (1 | model) + (1 | item) + (1 | judge) + (1 | model:item) +
              (1 | model:judge) + (1 | item:judge) + (1 | model:item:judge),
            data = d, REML = TRUE,
            control = lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5)))
  secs <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
  vc <- as.data.frame(VarCorr(m))
  rbind(data.frame(subset = subset, kind = "variance", term = vc$grp, value = vc$vcov),
        data.frame(subset = subset, kind = "fit",
                   term = c("nobs", "REMLcrit", "intercept", "seconds"),
                   value = c(nobs(m), REMLcrit(m), unname(fixef(m)[1]), secs)))
}
out <- rbind(fit_one(raw, "all"), fit_one(raw[raw$judge %in% three, ], "three_judges"))
write.csv(out, "reference_reml_jtj.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_reml_jtj.txt")
print(out)
