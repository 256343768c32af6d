# Frozen reference for evalmix.plan._cells CR2 (intercept-only) SE and Satterthwaite df.
# Run: Rscript tests/reference/plan/cr2_intercept.R (from any folder; writes beside it)
suppressMessages({library(clubSandwich); library(sandwich)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
sizes <- c(1, 2, 3, 5, 8, 13, 2, 4, 30, 6)
set.seed(20261130)
cl <- rep(seq_along(sizes), sizes)
y <- rnorm(length(cl)) + rnorm(length(sizes))[cl]
fit <- lm(y ~ 1)
v2 <- vcovCR(fit, cluster = cl, type = "CR2")
ct <- coef_test(fit, vcov = v2, test = "Satterthwaite")
v1 <- vcovCL(fit, cluster = cl, type = "HC1")
out <- data.frame(cluster = cl, y = sprintf("%.17g", y))
write.csv(out, file.path(here, "cr2_intercept_data.csv"), row.names = FALSE)
res <- data.frame(estimate = sprintf("%.17g", coef(fit)[1]), se_cr2 = sprintf("%.17g", ct$SE),
                  df_cr2 = sprintf("%.17g", ct$df_Satt), se_cr1 = sprintf("%.17g", sqrt(v1[1, 1])))
write.csv(res, file.path(here, "cr2_intercept.csv"), row.names = FALSE)
sink(file.path(here, "cr2_intercept_sessionInfo.txt")); print(sessionInfo()); sink()
