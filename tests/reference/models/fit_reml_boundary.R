# lmer REML on a small pairwise table whose intercept-slope correlation sits at +1 (a
# boundary fit): the reference of tests/models/test_models_reml.py::test_correlation_at_one_fits.
# Data: reml_boundary.csv, the linear-probability model evalmix builds for
# evalmix.sim.pairwise_judges(12, 3, 2, 2, tie_threshold=0, seed=3) (ct: the treatment
# indicator).
suppressMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv("reml_boundary.csv")
m <- lmer(y ~ 1 + ct + (1 + ct | scenario) + (1 | persona) + (1 | author), data = d,
          REML = TRUE)
vc <- as.data.frame(VarCorr(m))
out <- data.frame(
  name = c("fixed_intercept", "fixed_ct", "sd_scenario", "sd_ct_scenario",
           "cor_scenario", "sd_persona", "sd_author", "sd_residual", "reml_crit"),
  value = c(fixef(m), vc$sdcor[1], vc$sdcor[2], vc$sdcor[3], vc$sdcor[4], vc$sdcor[5],
            vc$sdcor[6], REMLcrit(m)))
write.csv(format(out, digits = 17), "reference_reml_boundary.csv", row.names = FALSE,
          quote = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_reml_boundary.txt")
