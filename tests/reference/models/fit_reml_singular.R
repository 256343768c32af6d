# lmer REML on gaussian_singular.csv (make_gaussian_singular.py, seeded): the reference of
# tests/models/test_models_reml.py::test_default_score_model_steps_down_like_lmer (issue 28).
# The maximal model (1 + ct | scenario) + (1 + ct | persona) is singular in lmer (the
# persona intercept-slope correlation at -1 or +1); evalmix's default steps down to the
# independent terms (lme4's ||), which lmer fits here too. ct: the treatment indicator.
# Run (from any folder):  Rscript tests/reference/models/fit_reml_singular.R   (~2 s)
# Writes reference_reml_singular.csv (model, kind, name, value) and
# sessionInfo_reml_singular.txt beside itself.
suppressPackageStartupMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)
d <- read.csv("gaussian_singular.csv")
d$ct <- as.numeric(d$condition == "treatment")
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
rows <- list()
put <- function(model, kind, name, value) {
  rows[[length(rows) + 1]] <<- data.frame(model = model, kind = kind, name = name,
                                          value = value)
}
lmer_rows <- function(fit, model) {
  put(model, "fixed", names(fixef(fit)), unname(fixef(fit)))
  put(model, "fixed_se", names(fixef(fit)), sqrt(diag(as.matrix(vcov(fit)))))
  vc <- as.data.frame(VarCorr(fit))
  sd <- vc[is.na(vc$var2), ]
  cr <- vc[!is.na(vc$var2), ]
  grp <- sub("\\.[0-9]+$", "", sd$grp)
  nm <- ifelse(sd$var1 == "(Intercept)" | is.na(sd$var1), grp, paste0(sd$var1, "|", grp))
  put(model, "sd", nm, sd$sdcor)
  if (nrow(cr)) put(model, "cor", cr$grp, cr$sdcor)
  put(model, "criterion", "REMLcrit", unname(REMLcrit(fit)))
  put(model, "criterion", "logLik", as.numeric(logLik(fit)))
  put(model, "criterion", "isSingular", as.numeric(isSingular(fit)))
}
m <- lmer(y ~ ct + (1 + ct | scenario) + (1 + ct | persona), d, REML = TRUE,
          control = ctrl)
lmer_rows(m, "maximal")
s <- lmer(y ~ ct + (1 + ct || scenario) + (1 + ct || persona), d, REML = TRUE,
          control = ctrl)
lmer_rows(s, "independent")
out <- do.call(rbind, rows)
write.csv(format(out, digits = 15), "reference_reml_singular.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_reml_singular.txt")
print(out, digits = 10)
