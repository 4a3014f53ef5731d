#!/usr/bin/env bash
# Installs the Debian packages the project needs, if missing (idempotent).
# Java 17 runs Spark; it is expected on the machine but installed when absent.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != "0" ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
