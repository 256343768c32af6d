# glmer and glmmTMB on a real file with the maximal default model (issue 28): MT-Bench repetition
# judgments (evalmix's model frame, mtbench_slopes.csv from make_mtbench_slopes.py):
#   y ~ condition + position + (1|item) + (1|item_group) + (1|judge) + (0 + position|judge)
#       + independent treatment-coded condition slopes by item and by item_group
# (4 evaluated models: 3 slope columns each, written as numeric dummies so that they are
# independent, as in evalmix's (0 + condition|f) with more than two conditions).
# Ties are 1/2 (fractional binomial; glmer warns about non-integer successes and fits
# the same deviance). Run (from any folder):
#   Rscript tests/reference/models/fit_mtbench_slopes.R
# glmmTMB takes about a minute; glmer (BOBYQA over 17 parameters) did not finish in 15
# minutes on the shared machine and is run only with the argument "glmer".
# Writes reference_mtbench_slopes.csv (software, kind, name, value, se) and
# sessionInfo_mtbench_slopes.txt.
suppressPackageStartupMessages({library(lme4); library(glmmTMB)})
run_glmer <- "glmer" %in% commandArgs(trailingOnly = TRUE)
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv(file.path(here, "mtbench_slopes.csv"))
for (c in c("item", "item_group", "judge")) d[[c]] <- factor(d[[c]])
cs <- grep("^c_", names(d), value = TRUE)
slopes <- function(g) paste(sprintf("(0 + %s | %s)", cs, g), collapse = " + ")
f <- as.formula(paste("y ~", paste(cs, collapse = " + "), "+ position + (1 | item) +",
                      "(1 | item_group) + (1 | judge) + (0 + position | judge) +",
                      slopes("item"), "+", slopes("item_group")))
rows <- list()
t0 <- Sys.time()
g <- suppressWarnings(glmmTMB(f, d, family = binomial))
secs <- as.numeric(Sys.time() - t0, units = "secs")
v <- VarCorr(g)$cond
sds <- unlist(lapply(seq_along(v), function(i) {
  s <- attr(v[[i]], "stddev"); grp <- sub("\\.[0-9]+$", "", names(v)[i])
  setNames(s, ifelse(names(s) == "(Intercept)", grp, paste0(names(s), "|", grp)))
}))
rows[[1]] <- rbind(
  data.frame(software = "glmmTMB", kind = "fixed", name = names(fixef(g)$cond),
             value = unname(fixef(g)$cond), se = sqrt(diag(vcov(g)$cond))),
  data.frame(software = "glmmTMB", kind = "sd", name = names(sds), value = unname(sds),
             se = NA),
  data.frame(software = "glmmTMB", kind = "criterion", name = c("logLik", "seconds"),
             value = c(as.numeric(logLik(g)), secs), se = NA))
if (run_glmer) {
  t0 <- Sys.time()
  m <- suppressWarnings(glmer(f, d, family = binomial,
                              control = glmerControl(optimizer = "bobyqa",
                                                     optCtrl = list(maxfun = 1e5))))
  secs <- as.numeric(Sys.time() - t0, units = "secs")
  vc <- as.data.frame(VarCorr(m))
  nm <- ifelse(vc$var1 == "(Intercept)", vc$grp,
               paste0(vc$var1, "|", sub("\\.[0-9]+$", "", vc$grp)))
  rows[[2]] <- rbind(
    data.frame(software = "lme4", kind = "fixed", name = names(fixef(m)),
               value = unname(fixef(m)), se = sqrt(diag(vcov(m)))),
    data.frame(software = "lme4", kind = "sd", name = nm, value = vc$sdcor, se = NA),
    data.frame(software = "lme4", kind = "criterion", name = c("logLik", "seconds"),
               value = c(as.numeric(logLik(m)), secs), se = NA))
}
out <- do.call(rbind, rows)
write.csv(out, file.path(here, "reference_mtbench_slopes.csv"), row.names = FALSE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo_mtbench_slopes.txt"))
print(out, digits = 10)
