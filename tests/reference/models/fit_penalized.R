# The boundary-avoiding penalised Laplace fit (sd_penalty = 2; Chung et al. 2013, 2015;
# blme's bglmer) on crossed_slopes.csv: the reference of
# tests/models/test_models_slopes.py::test_penalised_laplace_equals_glmmtmb_objective. Neither
# blme nor glmmTMB's priors (>= 1.1.7) are installed here, so the construction is done by
# hand on glmmTMB's own Laplace objective of the maximal model (obj$fn, the negative
# log-likelihood as a function of beta and glmmTMB's theta = log SDs and correlation
# parameters): minimise 2 * obj$fn - sum over terms of log|Sigma| (minus twice the log
# density of a Wishart(d + 2, infinite scale) prior on each term's covariance, gamma(2, 0)
# on a lone SD) by nlminb with obj$gr, from glmmTMB's ML fit.
# Run (from any folder):  Rscript tests/reference/models/fit_penalized.R   (~20 s)
# Writes reference_penalized.csv (name, value) and sessionInfo_penalized.txt.
suppressPackageStartupMessages(library(glmmTMB))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)
d <- read.csv("crossed_slopes.csv")
d$condition <- factor(d$condition)
f <- y ~ condition + (1 + condition | scenario) + (1 + condition | persona) + (1 | judge)
m <- glmmTMB(f, d, family = binomial)
obj <- m$obj
best <- obj$env$last.par.best
par0 <- best[names(best) != "b"]
ib <- which(names(par0) == "beta")
it <- which(names(par0) == "theta")
# glmmTMB's theta per term: log SDs, then (2 x 2) the parameter t with rho = t / sqrt(1 + t^2)
terms <- list(c(1, 2, 3), c(4, 5, 6), 7)   # scenario, persona (log sd, log sd, t), judge
logdet <- function(th) {
  out <- 0
  for (k in terms) {
    if (length(k) == 3) {
      rho <- th[k[3]] / sqrt(1 + th[k[3]]^2)
      out <- out + 2 * th[k[1]] + 2 * th[k[2]] + log(1 - rho^2)
    } else out <- out + 2 * th[k]
  }
  out
}
pen <- function(p) 2 * obj$fn(p) - logdet(p[it])
grad <- function(p) {
  g <- 2 * obj$gr(p)
  th <- p[it]
  gt <- numeric(length(th))
  for (k in terms) {
    if (length(k) == 3) {
      t <- th[k[3]]
      gt[k[1]] <- -2; gt[k[2]] <- -2
      gt[k[3]] <- 2 * t / (1 + t^2)      # d/dt of -log(1 - rho^2) = log(1 + t^2)
    } else gt[k] <- -2
  }
  g[it] <- g[it] + gt
  g
}
opt <- nlminb(par0, pen, grad, control = list(eval.max = 1e4, iter.max = 1e4,
                                              rel.tol = 1e-14, x.tol = 1e-12))
p <- opt$par
th <- p[it]
sdc <- function(k) c(exp(th[k[1]]), exp(th[k[2]]), th[k[3]] / sqrt(1 + th[k[3]]^2))
s <- sdc(terms[[1]])
q <- sdc(terms[[2]])
out <- data.frame(
  name = c("fixed_intercept", "fixed_treatment", "sd_scenario", "sd_treatment_scenario",
           "cor_scenario", "sd_persona", "sd_treatment_persona", "cor_persona", "sd_judge",
           "deviance", "penalised", "ml_deviance", "max_gradient"),
  value = c(p[ib], s, q, exp(th[7]), 2 * obj$fn(p), opt$objective, -2 * as.numeric(logLik(m)),
            max(abs(grad(p)))))
write.csv(format(out, digits = 15), "reference_penalized.csv", row.names = FALSE,
          quote = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_penalized.txt")
print(out, digits = 10)
cat("nlminb convergence:", opt$convergence, opt$message, "\n")
