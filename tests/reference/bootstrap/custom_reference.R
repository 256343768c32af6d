# Reference intervals from R's boot for evalmix.bootstrap of a custom statistic: the
# red-flag-rate ratio mean(flag | B) / mean(flag | A) over clusters (scenarios), on the
# resampling counts evalmix draws (custom_weights*.csv), so the replicates are identical.
# The statistic is computed here from the rows (weighted means), not from cluster sums.
# BCa: boot.ci(type = "bca") with L the jackknife influence values of boot's own
# empinf(type = "jack"), centred within strata (Efron & Tibshirani 1993, eq. 14.15, as
# scipy.stats.bootstrap and evalmix do; empinf centres at t0 instead). The default L of
# boot.ci (regression estimate, type = "reg") is recorded too (bca_reg) for the docs.
# Run: Rscript tests/reference/bootstrap/custom_reference.R (from any folder)
suppressPackageStartupMessages({library(boot); library(jsonlite)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)
d <- read.csv(file.path(here, "custom_data.csv"))
G <- length(unique(d$scenario))
cl <- data.frame(id = 0:(G - 1), stratum = tapply(d$stratum, d$scenario, function(s) s[1]))

ratio <- function(f) {
  w <- f[d$scenario + 1]
  b <- d$condition == "B"
  weighted.mean(d$red_flag[b], w[b]) / weighted.mean(d$red_flag[!b], w[!b])
}
stat <- function(data, f) ratio(f)
out <- list()
for (case in list(c("plain", "custom_weights.csv"), c("strata", "custom_weights_strata.csv"))) {
  W <- as.matrix(read.csv(file.path(here, case[2])))
  strata <- if (case[1] == "strata") as.integer(factor(cl$stratum)) else rep(1L, G)
  b <- boot(cl, stat, R = 2, stype = "f", strata = strata)
  b$t0 <- ratio(rep(1, G))
  b$t <- matrix(apply(W, 1, ratio), ncol = 1)
  b$R <- nrow(W)
  L <- empinf(b, type = "jack")
  L <- L - ave(L, strata)
  ci <- boot.ci(b, conf = 0.95, type = c("perc", "bca"), L = L)
  ci_reg <- boot.ci(b, conf = 0.95, type = "bca")
  out[[case[1]]] <- list(t0 = b$t0, sd = sd(b$t[, 1]), perc = ci$percent[4:5],
                         bca = ci$bca[4:5], bca_reg = ci_reg$bca[4:5],
                         acceleration = sum(L^3) / (6 * sum(L^2)^1.5),
                         draws_head = b$t[1:5, 1])
}
write_json(out, file.path(here, "custom_reference.json"), digits = NA, auto_unbox = TRUE,
           pretty = TRUE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo_custom.txt"))
