#!/usr/bin/env bash
# Runs on the lent GPU machine (scripts/device/pack.sh made this folder). Unpacks what this
# call carries into /tmp/ip, registers NVIDIA's OpenCL driver with the ICD loader (the image
# mounts libnvidia-opencl.so.1 but ships no nvidia.icd), and on the last part joins the model,
# checks its sha256 and runs jobs.txt: one command per line, with $IP (the binary), $M (the
# model), $OUT (the folder that comes back), each under `timeout ${JOB_TIMEOUT:-300}`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
read -r k parts name < "$here/part"
exec > >(tee -a "$OUT/device-p$k.log") 2>&1
mkdir -p /tmp/ip /tmp/ipcache
[ -f "$here/bundle.tgz" ] && tar -C /tmp/ip -xzf "$here/bundle.tgz"
[ -f "$here/model.part" ] && cp "$here/model.part" "/tmp/ip/model.part$k"
[ -f "$here/extra.tgz" ] && mkdir -p /tmp/ip/extra && tar -C /tmp/ip/extra -xzf "$here/extra.tgz"
nv=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [ -n "$nv" ]; then
  mkdir -p /etc/OpenCL/vendors && echo "$nv" > /etc/OpenCL/vendors/nvidia.icd
  export LD_LIBRARY_PATH=/tmp/ip/lib:$(dirname "$nv"):${LD_LIBRARY_PATH:-}
else
  export LD_LIBRARY_PATH=/tmp/ip/lib:${LD_LIBRARY_PATH:-}
fi
export XDG_CACHE_HOME=/tmp/ipcache
[ "$k" = "$parts" ] || { echo "device.sh: part $k of $parts unpacked"; exit 0; }
M=/tmp/ip/$name IP=/tmp/ip/bin/infinipot
model_parts=$(cat "$here/model_parts" 2>/dev/null || echo "$parts")  # an EXTRA call carries none
for i in $(seq 1 "$model_parts"); do
  [ -f "/tmp/ip/model.part$i" ] || { echo "device.sh: model part $i is gone (the machine went back between calls): start again from .dev/p1"; exit 3; }
done
cat $(for i in $(seq 1 "$model_parts"); do echo "/tmp/ip/model.part$i"; done) > "$M"
[ "$(sha256sum "$M" | cut -d' ' -f1)" = "$(cat "$here/model.sha256")" ] || { echo "device.sh: model sha256 mismatch"; exit 4; }
export M IP INFINIPOT_MODEL=$M
# Tests resolve paths compiled in on the build machine (its checkout's models/ and build/):
# that checkout's path is made to lead here.
src=$(cd "$here/../.." && pwd)
built_in=$(cat "$here/srcdir")
[ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$src" "$built_in"; }
mkdir -p "$src/models" "$src/build"
[ -e "$src/models/$name" ] || ln -s "$M" "$src/models/$name"
[ -e "$src/build/infinipot" ] || cp "$IP" "$src/build/"
"$IP" devices
while IFS= read -r job; do
  [ -z "$job" ] || [ "${job#\#}" != "$job" ] && continue
  echo "== $(date +%T) $job"
  timeout "${JOB_TIMEOUT:-300}" bash -c "$job"
  echo "== $(date +%T) rc=$?"
done < "$here/jobs.txt"
