# Frozen reference letters for tests/inference/test_letters.py: multcompView::multcompLetters
# (insert-and-absorb, Piepho 2004) on the boards of boards.csv (make_boards.py).
# Run: Rscript tests/reference/letters/letters.R (from any folder; writes letters.csv and
# sessionInfo.txt beside it)
suppressPackageStartupMessages(library(multcompView))
here <- local({a <- commandArgs(FALSE); dirname(normalizePath(sub("--file=", "", a[grep("--file=", a)])))})
setwd(here)  # reads and writes beside this script, from any folder
d <- read.csv("boards.csv", stringsAsFactors = FALSE, na.strings = "")
out <- list()
for (b in unique(d$board)) {
  rows <- d[d$board == b, ]
  k <- rows$k[1]
  lv <- sprintf("m%02d", 0:(k - 1))  # best first: letters follow this order
  x <- matrix(FALSE, k, k, dimnames = list(lv, lv))
  for (i in seq_len(nrow(rows))) {
    if (!is.na(rows$a[i])) {
      x[rows$a[i], rows$b[i]] <- TRUE
      x[rows$b[i], rows$a[i]] <- TRUE
    }
  }
  res <- multcompLetters(x)$Letters
  out[[length(out) + 1]] <- data.frame(board = b, model = names(res), letters = unname(res))
}
write.csv(do.call(rbind, out), "letters.csv", row.names = FALSE)
writeLines(capture.output(sessionInfo()), "sessionInfo.txt")
