# Reference intervals from R's boot (boot.ci: perc, bca, stud) for a pairs cluster
# bootstrap, using the resampling counts exported from Python (weights.csv), so the
# replicates are identical. Statistics: the mean (ratio of cluster sums) and the OLS
# slope of y on x; their per-replicate variances are CR1 (sandwich::vcovCL HC1) on the
# explicitly expanded resample (each drawn copy of a cluster is its own cluster).
# Run: Rscript tests/reference/bootstrap/boot_reference.R (from any folder)
suppressPackageStartupMessages({library(boot); library(sandwich); library(jsonlite)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv(file.path(here, "data.csv"))
W <- as.matrix(read.csv(file.path(here, "weights.csv")))
G <- ncol(W); B <- nrow(W)
cl <- data.frame(id = 0:(G - 1))

fit_stats <- function(f) {
  # expand: cluster g appears f[g] times, each copy a new cluster id
  rows <- unlist(lapply(seq_len(G), function(g) rep(list(which(d$cluster == g - 1)), f[g])),
                 recursive = FALSE)
  dd <- do.call(rbind, lapply(seq_along(rows), function(j) cbind(d[rows[[j]], ], copy = j)))
  m0 <- lm(y ~ 1, data = dd)
  m1 <- lm(y ~ x, data = dd)
  v0 <- vcovCL(m0, cluster = ~copy, type = "HC1", cadjust = TRUE)[1, 1]
  v1 <- vcovCL(m1, cluster = ~copy, type = "HC1", cadjust = TRUE)[2, 2]
  c(coef(m0)[1], v0, coef(m1)[2], v1)
}
stat <- function(data, f) fit_stats(f)
b <- boot(cl, stat, R = 2, stype = "f")
b$t0 <- fit_stats(rep(1, G))
b$t <- t(apply(W, 1, fit_stats))
b$R <- B
jack <- t(sapply(seq_len(G), function(g) { f <- rep(1, G); f[g] <- 0; fit_stats(f) }))
out <- list()
for (s in list(c("mean", 1, 2), c("slope", 3, 4))) {
  i <- as.integer(s[2]); v <- as.integer(s[3])
  L <- (G - 1) * (mean(jack[, i]) - jack[, i])   # empinf(type = "jack")
  ci <- boot.ci(b, conf = 0.95, type = c("perc", "bca", "stud"), index = c(i, v), L = L)
  out[[s[1]]] <- list(t0 = b$t0[i], se_cr1 = sqrt(b$t0[v]), sd = sd(b$t[, i]),
                      perc = ci$percent[4:5], bca = ci$bca[4:5], stud = ci$student[4:5],
                      draws_head = b$t[1:5, i], var_head = b$t[1:5, v])
}
write_json(out, file.path(here, "boot_reference.json"), digits = NA, auto_unbox = TRUE,
           pretty = TRUE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo.txt"))
