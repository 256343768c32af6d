## Frozen R references for evalmix's model back ends (issue 4).
## Run: Rscript tests/reference/models/fit_reference.R (from any folder)
## Reads crossed_binary.csv (made by make_crossed_binary.py), writes:
##   penicillin.csv, cbpp.csv                      data exported from lme4
##   reference_fixed.csv    dataset, software, model, term, estimate, se
##   reference_varcomp.csv  dataset, software, model, group, variance, sd, sd_lo, sd_hi, ci_method
##   reference_fit.csv      dataset, software, model, criterion, value (logLik, REML, nobs)
##   reference_ranef.csv    dataset, software, model, group, level, estimate, cond_sd
##                          (ranef(condVar = TRUE): conditional modes and conditional SDs)
##   sessionInfo.txt
suppressPackageStartupMessages({library(lme4); library(glmmTMB)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
options(digits = 12)

fixed_rows <- list(); vc_rows <- list(); fit_rows <- list(); re_rows <- list()
add_ranef <- function(dataset, model, fit) {
  re <- as.data.frame(ranef(fit, condVar = TRUE))
  re_rows[[length(re_rows) + 1]] <<- data.frame(
    dataset = dataset, software = "lme4", model = model, group = re$grpvar,
    level = as.character(re$grp), estimate = re$condval, cond_sd = re$condsd)
}
add_fixed <- function(dataset, software, model, est, se) {
  fixed_rows[[length(fixed_rows) + 1]] <<- data.frame(
    dataset = dataset, software = software, model = model, term = names(est),
    estimate = unname(est), se = unname(se))
}
add_vc <- function(dataset, software, model, group, sd, lo = NA, hi = NA, ci = "") {
  vc_rows[[length(vc_rows) + 1]] <<- data.frame(
    dataset = dataset, software = software, model = model, group = group,
    variance = sd^2, sd = sd, sd_lo = lo, sd_hi = hi, ci_method = ci)
}
add_fit <- function(dataset, software, model, criterion, value) {
  fit_rows[[length(fit_rows) + 1]] <<- data.frame(
    dataset = dataset, software = software, model = model, criterion = criterion,
    value = value)
}
lme4_vc <- function(dataset, model, fit, prof = NULL) {
  vc <- as.data.frame(VarCorr(fit))
  for (i in seq_len(nrow(vc))) {
    g <- vc$grp[i]; lo <- NA; hi <- NA; ci <- ""
    if (!is.null(prof)) {
      row <- if (g == "Residual") "sigma" else paste0(".sig", sprintf("%02d", i))
      if (row %in% rownames(prof)) { lo <- prof[row, 1]; hi <- prof[row, 2]; ci <- "profile 95%" }
    }
    add_vc(dataset, "lme4", model, g, vc$sdcor[i], lo, hi, ci)
  }
}
tmb_vc <- function(dataset, model, fit) {
  vc <- VarCorr(fit)$cond
  ## Wald intervals on log-SD, transformed back (glmmTMB's default for theta_)
  ci <- confint(fit, parm = "theta_", method = "wald", level = 0.95)
  for (g in names(vc)) {
    row <- paste0("Std.Dev.(Intercept)|", g)
    lo <- if (row %in% rownames(ci)) ci[row, 1] else NA
    hi <- if (row %in% rownames(ci)) ci[row, 2] else NA
    add_vc(dataset, "glmmTMB", model, g, attr(vc[[g]], "stddev")[[1]], lo, hi,
           "Wald 95% on log-SD")
  }
  if (family(fit)$family == "gaussian") add_vc(dataset, "glmmTMB", model, "Residual", sigma(fit))
}

## 1. Penicillin: lmer REML, crossed plate x sample ----------------------------------
data(Penicillin, package = "lme4")
write.csv(Penicillin, "penicillin.csv", row.names = FALSE)
m <- "diameter ~ 1 + (1|plate) + (1|sample), REML"
f1 <- lmer(diameter ~ 1 + (1 | plate) + (1 | sample), data = Penicillin, REML = TRUE)
add_ranef("penicillin", m, f1)  # before confint(): profiling mutates the fit's internals
p1 <- confint(f1, method = "profile", oldNames = TRUE, level = 0.95)
add_fixed("penicillin", "lme4", m, fixef(f1), sqrt(diag(vcov(f1))))
lme4_vc("penicillin", m, f1, p1)
add_fit("penicillin", "lme4", m, "REML_criterion", unname(REMLcrit(f1)))
add_fit("penicillin", "lme4", m, "logLik", as.numeric(logLik(f1)))
add_fit("penicillin", "lme4", m, "nobs", nobs(f1))
t1 <- glmmTMB(diameter ~ 1 + (1 | plate) + (1 | sample), data = Penicillin, REML = TRUE)
add_fixed("penicillin", "glmmTMB", m, fixef(t1)$cond, sqrt(diag(vcov(t1)$cond)))
tmb_vc("penicillin", m, t1)

## 2. cbpp: glmer binomial, Laplace --------------------------------------------------
data(cbpp, package = "lme4")
write.csv(cbpp, "cbpp.csv", row.names = FALSE)
m <- "cbind(incidence, size - incidence) ~ period + (1|herd), binomial, Laplace"
f2 <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), data = cbpp,
            family = binomial)
p2 <- confint(f2, parm = "theta_", method = "profile", oldNames = TRUE)
add_fixed("cbpp", "lme4", m, fixef(f2), sqrt(diag(as.matrix(vcov(f2)))))
lme4_vc("cbpp", m, f2, p2)
add_fit("cbpp", "lme4", m, "logLik", as.numeric(logLik(f2)))
add_fit("cbpp", "lme4", m, "nobs", nobs(f2))
t2 <- glmmTMB(cbind(incidence, size - incidence) ~ period + (1 | herd), data = cbpp,
              family = binomial)
add_fixed("cbpp", "glmmTMB", m, fixef(t2)$cond, sqrt(diag(vcov(t2)$cond)))
tmb_vc("cbpp", m, t2)
add_fit("cbpp", "glmmTMB", m, "logLik", as.numeric(logLik(t2)))

## 3. crossed binary (seeded simulation, 4 crossed factors) --------------------------
cb <- read.csv("crossed_binary.csv", stringsAsFactors = TRUE)
cb$condition <- relevel(cb$condition, ref = "control")
fm <- b_wins ~ condition + position + (1 | scenario) + (1 | persona) + (1 | author) + (1 | judge)
m <- "b_wins ~ condition + position + (1|scenario) + (1|persona) + (1|author) + (1|judge), binomial, Laplace"
t0 <- proc.time()[["elapsed"]]
f3 <- glmer(fm, data = cb, family = binomial)
add_ranef("crossed_binary", m, f3)  # before confint(): profiling mutates the fit's internals
add_fit("crossed_binary", "lme4", m, "seconds", proc.time()[["elapsed"]] - t0)
p3 <- tryCatch(confint(f3, parm = "theta_", method = "profile", oldNames = TRUE),
               error = function(e) NULL)
add_fixed("crossed_binary", "lme4", m, fixef(f3), sqrt(diag(as.matrix(vcov(f3)))))
lme4_vc("crossed_binary", m, f3, p3)
add_fit("crossed_binary", "lme4", m, "logLik", as.numeric(logLik(f3)))
add_fit("crossed_binary", "lme4", m, "nobs", nobs(f3))
t3 <- glmmTMB(fm, data = cb, family = binomial)
add_fixed("crossed_binary", "glmmTMB", m, fixef(t3)$cond, sqrt(diag(vcov(t3)$cond)))
tmb_vc("crossed_binary", m, t3)
add_fit("crossed_binary", "glmmTMB", m, "logLik", as.numeric(logLik(t3)))

## 3b. same data, linear probability model (lmer REML): reference for MixedLM ---------
m <- "b_wins ~ condition + position + (1|scenario) + (1|persona) + (1|author) + (1|judge), gaussian (linear probability), REML"
fm_lin <- b_wins ~ condition + position + (1 | scenario) + (1 | persona) + (1 | author) + (1 | judge)
f4 <- lmer(fm_lin, data = cb, REML = TRUE)
add_fixed("crossed_binary", "lme4", m, fixef(f4), sqrt(diag(as.matrix(vcov(f4)))))
lme4_vc("crossed_binary", m, f4)
add_fit("crossed_binary", "lme4", m, "REML_criterion", unname(REMLcrit(f4)))

fmt <- function(df) { for (k in names(df)) if (is.numeric(df[[k]])) df[[k]] <- signif(df[[k]], 12); df }
write.csv(fmt(do.call(rbind, fixed_rows)), "reference_fixed.csv", row.names = FALSE)
write.csv(fmt(do.call(rbind, vc_rows)), "reference_varcomp.csv", row.names = FALSE)
write.csv(fmt(do.call(rbind, fit_rows)), "reference_fit.csv", row.names = FALSE)
write.csv(fmt(do.call(rbind, re_rows)), "reference_ranef.csv", row.names = FALSE)
writeLines(c(capture.output(sessionInfo()),
             paste("lme4", as.character(packageVersion("lme4"))),
             paste("glmmTMB", as.character(packageVersion("glmmTMB"))),
             paste("TMB", as.character(packageVersion("TMB"))),
             paste("Matrix", as.character(packageVersion("Matrix")))),
           "sessionInfo.txt")
