#!/bin/bash
# Which single operations trigger full table validation? Load kube-proxy-like shape A (N services) plus
# a few probe objects, then time (kernel sendmsg) each tiny transaction.
N=${1:-5000}
D=/tmp/nftshape/A-$N-10
python3 /work/research/nft-shape/gen.py A $N 10 $D
unshare -n bash -s $D <<'IN'
D=$1
nft -f $D/full.nft
nft -f - <<'X'
add set ip kp ps { type ipv4_addr; }
add map ip kp pm { type ipv4_addr : ipv4_addr; }
add map ip kp pv { type ipv4_addr : verdict; }
add chain ip kp probe
add chain ip kp probe2
X
ks() { strace -f -T -e trace=sendmsg nft -f "$1" 2>&1 >/dev/null | awk -F'<' '/sendmsg/{gsub(/>/,"",$NF); if ($NF+0>m) m=$NF+0} END{printf "%.3f", m*1000}'; }
med() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
t() { # name, do-cmd, undo-cmd
  echo "$2" > /tmp/do.nft; echo "$3" > /tmp/undo.nft; L=""
  for i in 1 2 3 4 5; do L="$L $(ks /tmp/do.nft)"; nft -f /tmp/undo.nft; done
  printf "%-48s %8s ms  [%s]\n" "$1" "$(echo $L | med)" "${L# }"; }
t "set element (plain set)"            "add element ip kp ps { 1.2.3.4 }"            "delete element ip kp ps { 1.2.3.4 }"
t "map element (data map)"             "add element ip kp pm { 1.2.3.4 : 5.6.7.8 }"  "delete element ip kp pm { 1.2.3.4 }"
t "vmap element, verdict accept"       "add element ip kp pv { 1.2.3.4 : accept }"   "delete element ip kp pv { 1.2.3.4 }"
t "vmap element, verdict goto (unused vmap)" "add element ip kp pv { 1.2.3.4 : goto probe }" "delete element ip kp pv { 1.2.3.4 }"
t "service-ips element goto (kube-proxy)" "add element ip kp service-ips { 10.99.0.1 . tcp . 80 : goto probe }" "delete element ip kp service-ips { 10.99.0.1 . tcp . 80 }"
t "rule: counter (non-base chain)"     "add rule ip kp probe counter"               "flush chain ip kp probe"
t "rule: ip saddr 1.2.3.4 counter"     "add rule ip kp probe ip saddr 1.2.3.4 counter" "flush chain ip kp probe"
t "rule: ... accept (immediate verdict)" "add rule ip kp probe ip saddr 1.2.3.4 accept" "flush chain ip kp probe"
t "rule: ip saddr @ps counter (lookup)" "add rule ip kp probe ip saddr @ps counter"  "flush chain ip kp probe"
t "rule: ip saddr map @pm (data-map lookup)" "add rule ip kp probe meta mark set ip saddr map { 1.1.1.1 : 0x1 }" "flush chain ip kp probe"
t "rule: dnat to 1.2.3.4"              "add rule ip kp probe meta l4proto tcp dnat to 1.2.3.4" "flush chain ip kp probe"
t "rule: jump probe2"                  "add rule ip kp probe jump probe2"           "flush chain ip kp probe"
t "rule: meta mark set 1"              "add rule ip kp probe meta mark set 1"       "flush chain ip kp probe"
t "add empty chain"                    "add chain ip kp probe3"                     "delete chain ip kp probe3"
nft add rule ip kp probe counter
t "delete rule (flush chain w/ 1 counter rule)" "flush chain ip kp probe" "add rule ip kp probe counter"
IN
