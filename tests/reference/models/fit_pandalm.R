# Frozen glmer references on real data: PandaLM's test-set judgments in ../shared/data
# (Bradley-Terry, 170 items nested in 50 apps, 5 judges). Recodes the raw CSV itself.
#   Rscript tests/reference/models/fit_pandalm.R (from any folder; ~15 s; needs ../shared)
# Writes reference_pandalm.csv (model, kind, term, estimate, se) and
# sessionInfo_pandalm.txt. Models:
#   item_agq15:    y ~ 0 + abilities + (1 | item), adaptive Gauss-Hermite, 15 nodes
#                  (an accurate marginal likelihood; 5 nodes give the same to 1e-4)
#   item_laplace:  the same model, Laplace (nAGQ = 1)
#   default_laplace: evalmix's default, + (1 | app) + (1 | judge), Laplace
suppressPackageStartupMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
path <- "../../../../shared/data/pandalm/pandalm_testset_judgments.csv"
d <- read.csv(path, stringsAsFactors = FALSE)
d <- d[!is.na(d$outcome) & d$outcome != "", ]
# response: model_a wins; ties count 1/2 (evalmix ties = "half")
d$y <- ifelse(d$outcome == "a", 1, ifelse(d$outcome == "b", 0, 0.5))
models <- sort(unique(c(d$model_a, d$model_b)), method = "radix")
# abilities: +1 for model_a, -1 for model_b; the first model (C-locale order) is 0
X <- sapply(models[-1], function(m) (d$model_a == m) - (d$model_b == m))
colnames(X) <- paste0("model", seq_len(ncol(X)))
d <- cbind(d, X)
d$item <- factor(d$item_id)
d$app <- factor(d$item_group)
d$judge <- factor(d$judge)
abil <- paste("y ~ 0 +", paste(colnames(X), collapse = " + "))
fits <- list(
  item_agq15 = list(f = paste(abil, "+ (1 | item)"), q = 15),
  item_laplace = list(f = paste(abil, "+ (1 | item)"), q = 1),
  default_laplace = list(f = paste(abil, "+ (1 | item) + (1 | app) + (1 | judge)"), q = 1))
out <- list()
for (name in names(fits)) {
  t0 <- Sys.time()
  m <- suppressWarnings(glmer(as.formula(fits[[name]]$f), data = d, family = binomial,
                              nAGQ = fits[[name]]$q,
                              control = glmerControl(optimizer = "bobyqa")))
  secs <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
  vc <- as.data.frame(VarCorr(m))
  out[[name]] <- rbind(
    data.frame(model = name, kind = "fixed", term = models[-1],
               estimate = unname(fixef(m)), se = unname(sqrt(diag(as.matrix(vcov(m)))))),
    data.frame(model = name, kind = "sd", term = vc$grp, estimate = vc$sdcor, se = NA),
    data.frame(model = name, kind = "fit", term = c("nobs", "logLik", "seconds", "singular"),
               estimate = c(nobs(m), as.numeric(logLik(m)), secs, isSingular(m)), se = NA))
}
res <- do.call(rbind, out)
write.csv(res, "reference_pandalm.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo_pandalm.txt")
print(res, row.names = FALSE)
