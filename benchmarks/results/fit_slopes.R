# R timings of benchmarks/bench_slopes.py (issue 28): glmer and glmmTMB on the maximal,
# independent-slope and intercept-only models of the benchmark's data.
#   .venv/bin/python benchmarks/bench_slopes.py --write-data /tmp/slopes
#   Rscript benchmarks/results/fit_slopes.R /tmp/slopes/slopes.csv
# Writes benchmarks/results/slopes_r.json (seconds and logLik per model and package).
suppressPackageStartupMessages({library(lme4); library(glmmTMB); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
d$condition <- factor(d$condition)
d$treat <- as.numeric(d$condition == "treatment")
models <- list(
  intercepts = y ~ condition + (1 | scenario) + (1 | persona) + (1 | judge),
  independent = y ~ condition + (1 + treat || scenario) + (1 + treat || persona) + (1 | judge),
  maximal = y ~ condition + (1 + condition | scenario) + (1 + condition | persona) + (1 | judge))
out <- list(glmer = list(), glmmTMB = list(), R = R.version.string,
            lme4 = as.character(packageVersion("lme4")),
            glmmTMB_version = as.character(packageVersion("glmmTMB")))
for (m in names(models)) {
  t0 <- Sys.time()
  f <- glmer(models[[m]], d, family = binomial, control = glmerControl(optimizer = "bobyqa"))
  out$glmer[[m]] <- list(seconds = as.numeric(Sys.time() - t0, units = "secs"),
                         loglik = as.numeric(logLik(f)))
  # glmmTMB has no || for a factor; the numeric dummy gives the same model
  fm <- if (m == "independent") y ~ condition + diag(1 + treat | scenario) +
    diag(1 + treat | persona) + (1 | judge) else models[[m]]
  t0 <- Sys.time()
  g <- glmmTMB(fm, d, family = binomial)
  out$glmmTMB[[m]] <- list(seconds = as.numeric(Sys.time() - t0, units = "secs"),
                           loglik = as.numeric(logLik(g)))
  print(c(m, out$glmer[[m]]$seconds, out$glmmTMB[[m]]$seconds))
}
write(toJSON(out, auto_unbox = TRUE, digits = 10, pretty = TRUE),
      "benchmarks/results/slopes_r.json")
