for f in *.txt; do grep -n x "$f" || true; done
cat <<EOF
rm -rf /
EOF
