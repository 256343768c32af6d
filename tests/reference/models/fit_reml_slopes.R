# lmer REML references for evalmix's REML back end (issue 28): the maximal model with
# correlated (1 + condition | f) slopes on gaussian_slopes.csv (make_gaussian_slopes.py,
# seeded), and, where ../shared/data is beside the clone, WildBench's scores with
# (1 | item) + (1 | item:model) + (1 | judge_run) (the REML speed case of
# benchmarks/bench_reml.py; make references runs it only where ../shared/data is).
# Run (from any folder):
#   Rscript tests/reference/models/fit_reml_slopes.R      (~30 s)
# Writes reference_reml_slopes.csv (model, kind, name, value, se) and
# sessionInfo_reml_slopes.txt beside itself.
suppressPackageStartupMessages(library(lme4))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
rows <- list()
put <- function(model, kind, name, value, se = NA) {
  rows[[length(rows) + 1]] <<- data.frame(model = model, kind = kind, name = name,
                                          value = value, se = se)
}
lmer_rows <- function(fit, model) {
  put(model, "fixed", names(fixef(fit)), unname(fixef(fit)), sqrt(diag(vcov(fit))))
  vc <- as.data.frame(VarCorr(fit))
  sd <- vc[is.na(vc$var2), ]
  cr <- vc[!is.na(vc$var2), ]
  nm <- ifelse(sd$var1 == "(Intercept)" | is.na(sd$var1), sd$grp,
               paste0(sd$var1, "|", sd$grp))
  put(model, "sd", nm, sd$sdcor)
  if (nrow(cr)) put(model, "cor", cr$grp, cr$sdcor)
  put(model, "criterion", "REMLcrit", unname(REMLcrit(fit)))
}
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
d <- read.csv(file.path(here, "gaussian_slopes.csv"))
d$condition <- factor(d$condition)
m <- lmer(y ~ condition + (1 + condition | scenario) + (1 + condition | persona) +
            (1 | judge), d, REML = TRUE, control = ctrl)
lmer_rows(m, "gaussian_correlated")
wb <- file.path(here, "..", "..", "..", "..", "shared", "data", "wildbench",
                "wildbench_scores.csv")
if (file.exists(wb)) {
  w <- read.csv(wb)
  w <- w[!is.na(w$score), ]
  w$model <- factor(w$model, levels = sort(unique(w$model), method = "radix"))
  w$item_model <- interaction(w$item_id, w$model, drop = TRUE)
  f <- lmer(score ~ model + (1 | item_id) + (1 | item_model) + (1 | judge_run), w,
            REML = TRUE, control = ctrl)
  lmer_rows(f, "wildbench")
} else message("no ../shared/data beside the clone: the WildBench rows are skipped")
out <- do.call(rbind, rows)
write.csv(out, file.path(here, "reference_reml_slopes.csv"), row.names = FALSE)
writeLines(capture.output(sessionInfo()), file.path(here, "sessionInfo_reml_slopes.txt"))
print(out, digits = 10)
