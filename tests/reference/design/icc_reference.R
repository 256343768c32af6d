# One-way ANOVA ICC with its F-based interval, computed by hand from aov(); lme4 REML
# variance ratio for the balanced set (equal to the ANOVA ICC there when positive).
# Run: Rscript tests/reference/design/icc_reference.R (from any folder)
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
icc_aov <- function(d, level = 0.95) {
  d$cluster <- factor(d$cluster)
  tab <- summary(aov(y ~ cluster, data = d))[[1]]
  msb <- tab[["Mean Sq"]][1]; msw <- tab[["Mean Sq"]][2]
  df1 <- tab[["Df"]][1]; df2 <- tab[["Df"]][2]
  N <- nrow(d); n_g <- table(d$cluster)
  n0 <- (N - sum(n_g^2) / N) / df1
  F <- msb / msw; a <- 1 - level
  FL <- F / qf(1 - a / 2, df1, df2); FU <- F / qf(a / 2, df1, df2)
  list(msb = msb, msw = msw, n0 = n0, F = F, icc = (msb - msw) / (msb + (n0 - 1) * msw),
       lo = (FL - 1) / (FL + n0 - 1), hi = (FU - 1) / (FU + n0 - 1))
}
out <- list()
for (nm in c("unbalanced", "balanced")) {
  d <- read.csv(file.path(here, paste0(nm, ".csv")))
  r <- icc_aov(d)
  r90 <- icc_aov(d, 0.90)
  r$lo90 <- r90$lo; r$hi90 <- r90$hi
  m <- lmer(y ~ 1 + (1 | cluster), data = d, REML = TRUE,
            control = lmerControl(optimizer = "bobyqa",
                                  optCtrl = list(rhobeg = 0.2, rhoend = 1e-10)))
  vc <- as.data.frame(VarCorr(m))$vcov
  r$lme4_ratio <- vc[1] / sum(vc)
  out[[nm]] <- r
}
write_json(out, file.path(here, "icc_reference.json"), digits = NA, auto_unbox = TRUE,
           pretty = TRUE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo.txt"))
