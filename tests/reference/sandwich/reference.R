# Frozen reference values for tests/inference/test_sandwich.py.
# Run: Rscript tests/reference/sandwich/reference.R (from any folder; writes reference.csv
# and sessionInfo.txt beside it)
# CR0/CR1 and two-way CR1: sandwich::vcovCL (CR1 = type "HC1": G/(G-1) * (N-1)/(N-k);
#   CR0 = type "HC0", cadjust = FALSE; two-way: cluster = ~a + b, multi0 = FALSE, fix = TRUE).
# CR2, CR3 and Satterthwaite df: clubSandwich::vcovCR + coef_test(test = "Satterthwaite").
suppressPackageStartupMessages({library(sandwich); library(clubSandwich)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv("data.csv", stringsAsFactors = TRUE)
fits <- list(
  mean = lm(y ~ 1, data = d),
  ols = lm(y ~ x + treat, data = d),
  logit = glm(ybin ~ x + treat, family = binomial(), data = d,
               control = glm.control(epsilon = 1e-14, maxit = 100))
)
rows <- list()
add <- function(model, type, cluster, se, df) {
  rows[[length(rows) + 1]] <<- data.frame(model = model, term = names(se), type = type,
                                          cluster = cluster, se = unname(se), df = df)
}
for (m in names(fits)) {
  f <- fits[[m]]
  for (cl in c("a", "b")) {
    add(m, "CR0", cl, sqrt(diag(vcovCL(f, cluster = d[[cl]], type = "HC0", cadjust = FALSE))), NA)
    add(m, "CR1", cl, sqrt(diag(vcovCL(f, cluster = d[[cl]], type = "HC1"))), NA)
    for (tp in c("CR2", "CR3")) {
      V <- vcovCR(f, cluster = d[[cl]], type = tp)
      ct <- coef_test(f, vcov = V, test = "Satterthwaite")
      add(m, tp, cl, setNames(ct$SE, rownames(V)), ct$df_Satt)
    }
  }
  add(m, "CR1", "a+b", sqrt(diag(vcovCL(f, cluster = ~ a + b, type = "HC1", multi0 = FALSE,
                                         fix = TRUE))), NA)
  add(m, "CR0", "a+b", sqrt(diag(vcovCL(f, cluster = ~ a + b, type = "HC0", cadjust = FALSE,
                                         multi0 = FALSE, fix = TRUE))), NA)
}
out <- do.call(rbind, rows)
write.csv(out, "reference.csv", row.names = FALSE)
options(digits = 17)
coefs <- do.call(rbind, lapply(names(fits), function(m)
  data.frame(model = m, term = names(coef(fits[[m]])), estimate = unname(coef(fits[[m]])))))
write.csv(format(coefs, digits = 17), "coefficients.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo.txt")
