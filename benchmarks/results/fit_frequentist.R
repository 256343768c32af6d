# Timings of lme4 / glmmTMB on the data of benchmarks/bench_frequentist.py (run once;
# frozen in benchmarks/results/frequentist_r.json; CI never runs R).
#
#   python benchmarks/bench_frequentist.py --write-data /tmp/rbench
#   Rscript benchmarks/results/fit_frequentist.R /tmp/rbench benchmarks/results/frequentist_r.json
#
# Each fit is timed once after one warm-up fit of a small model (elapsed seconds of
# system.time). Machine: the same shared 2-core sandbox as the Python timings.
suppressPackageStartupMessages({library(lme4); library(glmmTMB); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]; out <- args[2]
only <- if (length(args) > 2) args[3:length(args)] else character(0)
res <- if (file.exists(out)) fromJSON(out, simplifyVector = FALSE) else list()

fac <- function(d, cols) { for (c in cols) d[[c]] <- factor(d[[c]]); d }
invisible(lmer(Reaction ~ Days + (1 | Subject), sleepstudy))  # warm-up

timed <- function(expr) {
  t <- system.time(fit <- eval.parent(substitute(expr)))
  list(fit = fit, seconds = unname(t["elapsed"]))
}
summ_lmer <- function(f, s) {
  vc <- as.data.frame(VarCorr(f))
  list(seconds = s, sd = setNames(as.list(vc$sdcor), vc$grp),
       intercept = unname(fixef(f)[1]), intercept_se = unname(sqrt(diag(vcov(f)))[1]),
       loglik_or_reml = if (isREML(f)) unname(REMLcrit(f)) else unname(logLik(f)[1]),
       optimizer = f@optinfo$optimizer, sessionInfo = R.version.string,
       lme4 = as.character(packageVersion("lme4")))
}
summ_tmb <- function(f, s) {
  vc <- VarCorr(f)$cond
  list(seconds = s, sd = lapply(vc, function(v) unname(attr(v, "stddev"))),
       intercept = unname(fixef(f)$cond[1]),
       intercept_se = unname(sqrt(diag(vcov(f)$cond))[1]),
       loglik_or_reml = unname(logLik(f)[1]),
       glmmTMB = as.character(packageVersion("glmmTMB")))
}
want <- function(case) length(only) == 0 || case %in% only

if (want("reml_interaction")) {
  d <- fac(read.csv(file.path(dir, "reml_interaction.csv")),
           c("item", "item_model", "judge", "model"))
  a <- timed(lmer(y ~ model + (1 | item) + (1 | item_model) + (1 | judge), d, REML = TRUE))
  b <- timed(glmmTMB(y ~ model + (1 | item) + (1 | item_model) + (1 | judge), d, REML = TRUE))
  res$reml_interaction <- list(lme4 = summ_lmer(a$fit, a$seconds),
                               glmmTMB = summ_tmb(b$fit, b$seconds))
}
if (want("laplace_crossed")) {
  d <- fac(read.csv(file.path(dir, "laplace_crossed.csv")), c("item", "model", "judge"))
  a <- timed(glmer(y ~ 1 + (1 | item) + (1 | model) + (1 | judge), d, family = binomial))
  b <- timed(glmmTMB(y ~ 1 + (1 | item) + (1 | model) + (1 | judge), d, family = binomial))
  res$laplace_crossed <- list(lme4 = summ_lmer(a$fit, a$seconds),
                              glmmTMB = summ_tmb(b$fit, b$seconds))
}
if (want("laplace_fixed_models")) {
  d <- fac(read.csv(file.path(dir, "laplace_crossed.csv")), c("item", "model", "judge"))
  a <- timed(glmer(y ~ model + (1 | item) + (1 | judge), d, family = binomial))
  b <- timed(glmmTMB(y ~ model + (1 | item) + (1 | judge), d, family = binomial))
  res$laplace_fixed_models <- list(lme4 = summ_lmer(a$fit, a$seconds),
                                   glmmTMB = summ_tmb(b$fit, b$seconds))
}
res$load_average <- readLines("/proc/loadavg")
write(toJSON(res, auto_unbox = TRUE, digits = NA, pretty = TRUE), out)
