#!/usr/bin/env bash
# Packs what a GPU machine needs to run tests/gpu/run and bench/run into
# .gpu/build (ignored by git, carried to the device machine): the built
# binaries, and in .gpu/build/lib the non-libc shared libraries that ldd
# shows for the scheduler and tools (the GPU machine can install nothing),
# and in .gpu/build/py the device plugin's and DRA driver's protobuf
# messages for the fake kubelet (no protoc there). libnvshare.so needs
# none: it links only libc.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${NVS_BUILD:-build}
D=.gpu/build
rm -rf .gpu && mkdir -p "$D/lib" "$D/bench" "$D/tests/sim"
cp "$B/libnvshare.so" "$B/nvshare-scheduler" "$B/nvsharectl" "$D/"
[ -f "$B/bench/sched_latency" ] && cp "$B/bench/sched_latency" "$D/bench/"
[ -f "$B/nvshare-device-plugin" ] && cp "$B/nvshare-device-plugin" "$D/"
[ -f "$B/nvshare-dra-plugin" ] && cp "$B/nvshare-dra-plugin" "$D/"
mkdir -p "$D/py"
protoc --proto_path=device-plugin --python_out="$D/py" device-plugin/deviceplugin.proto
protoc --proto_path=dra-plugin --python_out="$D/py" dra-plugin/dra.proto
for bin in "$D/nvshare-scheduler" "$D/nvsharectl" "$D/bench/sched_latency" "$D/nvshare-device-plugin" \
  "$D/nvshare-dra-plugin"; do
  [ -f "$bin" ] || continue
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*) ;;
      *) cp -n "$lib" "$D/lib/" ;;
    esac
  done
done
du -sh .gpu
