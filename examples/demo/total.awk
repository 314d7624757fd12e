# Units sold per product. `run` passes awk only `-f <script>`, so the field separator is set here.
BEGIN { FS = "," }
NR > 1 { units[$3] += $4 }
END { for (p in units) print p, units[p] }
