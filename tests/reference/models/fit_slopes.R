# Reference fits of the maximal model (issue 28): correlated (1 + condition | f) and
# independent (1 + condition || f) condition slopes for two crossed sampled factors.
# Data: crossed_slopes.csv from make_crossed_slopes.py (seeded). Run (from any
# folder):  Rscript tests/reference/models/fit_slopes.R   (~15 s)
# Writes tests/reference/models/reference_slopes.csv (software, model, kind, name, value,
# se: fixed effects with SEs, SDs, correlations, logLik, seconds) and sessionInfo_slopes.txt.
suppressPackageStartupMessages({library(lme4); library(glmmTMB)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv(file.path(here, "crossed_slopes.csv"))
d$condition <- factor(d$condition)
d$treat <- as.numeric(d$condition == "treatment")
rows <- list()
put <- function(software, model, kind, name, value, se = NA) {
  rows[[length(rows) + 1]] <<- data.frame(software = software, model = model, kind = kind,
                                          name = name, value = value, se = se)
}
lme4_rows <- function(fit, model, secs) {
  put("lme4", model, "fixed", names(fixef(fit)), unname(fixef(fit)), sqrt(diag(vcov(fit))))
  vc <- as.data.frame(VarCorr(fit))
  sd <- vc[is.na(vc$var2), ]
  cr <- vc[!is.na(vc$var2), ]
  nm <- ifelse(sd$var1 == "(Intercept)", sub("\\.1$", "", sd$grp),
               paste0(sd$var1, "|", sub("\\.1$", "", sd$grp)))
  put("lme4", model, "sd", nm, sd$sdcor)
  if (nrow(cr)) put("lme4", model, "cor", cr$grp, cr$sdcor)
  put("lme4", model, "criterion", "logLik", as.numeric(logLik(fit)))
  put("lme4", model, "criterion", "seconds", secs)
}
ctrl <- glmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
f_cor <- "y ~ condition + (1 + condition | scenario) + (1 + condition | persona) + (1 | judge)"
t0 <- Sys.time()
m1 <- glmer(as.formula(f_cor), d, family = binomial, control = ctrl)
lme4_rows(m1, "correlated", as.numeric(Sys.time() - t0, units = "secs"))
t0 <- Sys.time()
m2 <- glmer(y ~ condition + (1 + treat || scenario) + (1 + treat || persona) + (1 | judge),
            d, family = binomial, control = ctrl)
lme4_rows(m2, "independent", as.numeric(Sys.time() - t0, units = "secs"))
t0 <- Sys.time()
g1 <- glmmTMB(as.formula(f_cor), d, family = binomial)
secs <- as.numeric(Sys.time() - t0, units = "secs")
put("glmmTMB", "correlated", "fixed", names(fixef(g1)$cond), unname(fixef(g1)$cond),
    sqrt(diag(vcov(g1)$cond)))
v <- VarCorr(g1)$cond
for (g in names(v)) {
  s <- attr(v[[g]], "stddev")
  put("glmmTMB", "correlated", "sd", ifelse(names(s) == "(Intercept)", g,
                                            paste0(names(s), "|", g)), unname(s))
  cm <- attr(v[[g]], "correlation")
  if (length(s) > 1) put("glmmTMB", "correlated", "cor", g, cm[2, 1])
}
put("glmmTMB", "correlated", "criterion", "logLik", as.numeric(logLik(g1)))
put("glmmTMB", "correlated", "criterion", "seconds", secs)
out <- do.call(rbind, rows)
write.csv(out, file.path(here, "reference_slopes.csv"), row.names = FALSE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo_slopes.txt"))
print(out, digits = 10)
