# Reference fits for the sparse REML / Laplace back ends (issue 14, item 4).
# Data: sparse_design.csv from make_sparse_design.py (seeded). Run (from any folder):
#   Rscript tests/reference/models/fit_sparse.R
# Writes tests/reference/models/reference_sparse.csv and sessionInfo_sparse.txt.
suppressPackageStartupMessages({library(lme4); library(glmmTMB)})
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv(file.path(here, "sparse_design.csv"))
for (c in c("item", "model", "judge", "item_model")) d[[c]] <- factor(d[[c]])
rows <- list()
add <- function(fit, software, model, kind) {
  if (software == "lme4") {
    fe <- fixef(fit); se <- sqrt(diag(vcov(fit)))
    vc <- as.data.frame(VarCorr(fit))
    vc_names <- ifelse(is.na(vc$var1) | vc$var1 == "(Intercept)", vc$grp,
                       paste0(vc$var1, "|", vc$grp))
    sds <- setNames(vc$sdcor, vc_names)
    crit <- if (isREML(fit)) REMLcrit(fit) else as.numeric(logLik(fit))
  } else {
    fe <- fixef(fit)$cond; se <- sqrt(diag(vcov(fit)$cond))
    v <- VarCorr(fit)$cond
    sds <- unlist(lapply(names(v), function(g) {
      s <- attr(v[[g]], "stddev"); nm <- ifelse(names(s) == "(Intercept)", sub("\\.1$", "", g),
                                                 paste0(names(s), "|", sub("\\.1$", "", g)))
      setNames(s, nm)
    }))
    if (!is.null(attr(v, "sc")) && kind == "gaussian") sds["Residual"] <- attr(v, "sc")
    crit <- as.numeric(logLik(fit))
  }
  rows[[length(rows) + 1]] <<- data.frame(software = software, model = model, kind = "fixed",
                                          name = names(fe), value = unname(fe), se = unname(se))
  rows[[length(rows) + 1]] <<- data.frame(software = software, model = model, kind = "sd",
                                          name = names(sds), value = unname(sds), se = NA)
  rows[[length(rows) + 1]] <<- data.frame(software = software, model = model,
                                          kind = "criterion", name = if (software == "lme4" &&
                                          kind == "gaussian") "REMLcrit" else "logLik",
                                          value = crit, se = NA)
}
f1 <- lmer(score ~ model + (1 | item) + (1 | item_model) + (1 | judge), d, REML = TRUE,
           control = lmerControl(optCtrl = list(ftol_abs = 1e-12, ftol_rel = 1e-14)))
add(f1, "lme4", "gaussian_interaction", "gaussian")
f2 <- glmmTMB(score ~ model + (1 | item) + (1 | item_model) + (1 | judge), d, REML = TRUE)
add(f2, "glmmTMB", "gaussian_interaction", "gaussian")
f3 <- glmer(win ~ model + position + (1 | item) + (1 | judge) + (0 + position | judge), d,
            family = binomial)
add(f3, "lme4", "logit_slope", "binomial")
f4 <- glmmTMB(win ~ model + position + (1 | item) + (1 | judge) + (0 + position | judge), d,
              family = binomial)
add(f4, "glmmTMB", "logit_slope", "binomial")
out <- do.call(rbind, rows)
write.csv(out, file.path(here, "reference_sparse.csv"), row.names = FALSE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo_sparse.txt"))
print(out)
