# Frozen reference rank sets for tests/inference/test_ranking_sets.py: the R package csranks
# (Mogstad, Romano, Shaikh & Wilhelm 2024) on PISA 2018 mathematics (the package's own
# `pisa2018` data: OECD means and standard errors) and on a correlated 10-estimate case.
# csranks is not on Debian and CRAN is out of reach here, so its R sources are sourced
# from a checkout given as the argument (github.com/danielwilhelm/R-CS-ranks, commit
# bd4f75576a1fb7da482500e2a1446aa1b72339cc, version 1.2.2.9001, GPL >= 3; needs MASS, cli):
#   Rscript tests/reference/ranks/csranks_reference.R /path/to/R-CS-ranks
# Writes pisa2018_math.csv, csranks_pisa.csv, csranks_correlated.csv and sessionInfo.txt
# beside itself. Each set is computed with R = 20000 draws under seeds 1..5; `stable`
# says whether the five agree (csranks redraws at every step, so a bound on the edge of
# its critical value can move with the seed; the tests compare the stable ones).
args <- commandArgs(TRUE)
if (length(args) != 1) stop("usage: Rscript csranks_reference.R /path/to/R-CS-ranks")
src <- normalizePath(args[1])
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
for (f in c("ranks.R", "diffmeans.R", "rank_utils.R", "argument_checks.R", "utilityfunctions.R"))
  source(file.path(src, "R", f))
load(file.path(src, "data", "pisa2018.rda"))
setwd(here)  # writes beside this script, from any folder
R <- 20000
seeds <- 1:5

sets <- function(x, V) {
  one <- function(seed) {
    s1 <- csranks(x, V, simul = TRUE, stepdown = TRUE, R = R, seed = seed)
    s0 <- csranks(x, V, simul = TRUE, stepdown = FALSE, R = R, seed = seed)
    m1 <- csranks(x, V, simul = FALSE, stepdown = TRUE, R = R, seed = seed)
    data.frame(rank = s1$rank, simul_L = s1$L, simul_U = s1$U,
               single_L = s0$L, single_U = s0$U, marg_L = m1$L, marg_U = m1$U,
               best1_95 = cstaubest(x, V, tau = 1, coverage = 0.95, R = R, seed = seed),
               best5_95 = cstaubest(x, V, tau = 5, coverage = 0.95, R = R, seed = seed),
               best5_90 = cstaubest(x, V, tau = 5, coverage = 0.90, R = R, seed = seed))
  }
  runs <- lapply(seeds, one)
  out <- runs[[1]]
  for (col in names(out)[-1]) {
    same <- Reduce(`&`, lapply(runs[-1], function(r) r[[col]] == out[[col]]))
    out[[paste0(col, "_stable")]] <- same
  }
  out
}

pisa <- data.frame(jurisdiction = pisa2018$jurisdiction, math_score = pisa2018$math_score,
                   math_se = pisa2018$math_se)
write.csv(pisa, "pisa2018_math.csv", row.names = FALSE)
p <- sets(pisa$math_score, diag(pisa$math_se^2))
write.csv(cbind(jurisdiction = pisa$jurisdiction, p), "csranks_pisa.csv", row.names = FALSE)

# correlated: estimates close together in pairs, covariance A A' / 2000 + 0.0005 I with
# A[i, j] = cos(i j) (standard errors about 0.05)
k <- 10
x <- c(1.0, 0.95, 0.7, 0.62, 0.5, 0.2, 0.15, -0.1, -0.5, -0.55)
A <- outer(1:k, 1:k, function(i, j) cos(i * j))
V <- A %*% t(A) / 2000 + diag(0.0005, k)
corr <- sets(x, V)
write.csv(cbind(x = x, V = V, corr), "csranks_correlated.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo.txt")
