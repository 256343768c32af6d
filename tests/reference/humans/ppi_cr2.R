# clubSandwich CR2 variance and Satterthwaite df of the PPI contrast (see ppi_cr2.py).
# Run: Rscript tests/reference/humans/ppi_cr2.R (from any folder)
library(clubSandwich)
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv("ppi_cr2_data.csv")
fit <- lm(z ~ 0 + group, data = d)
V <- vcovCR(fit, cluster = d$cluster, type = "CR2")
contrast <- matrix(c(1, 1), nrow = 1)
lc <- linear_contrast(fit, vcov = V, contrasts = contrast, test = "Satterthwaite")
V1 <- vcovCR(fit, cluster = d$cluster, type = "CR1")
out <- sprintf('{"estimate": %.17g, "se": %.17g, "df": %.17g, "se_cr1": %.17g, "clubSandwich": "%s", "R": "%s"}',
               lc$Est, lc$SE, lc$df, sqrt(as.numeric(contrast %*% V1 %*% t(contrast))),
               as.character(packageVersion("clubSandwich")), R.version.string)
writeLines(out, "ppi_cr2.json")
