#!/usr/bin/env bash
# Installs the Debian packages the project needs, if missing (idempotent).
# Java 17 runs Spark; it is expected on the machine but installed when absent.
# PostgreSQL (binaries under /usr/lib/postgresql/<version>/bin) is started by the tests of the
# PostgreSQL sink on a private port; the package is installed when its binaries are absent.
# ZooKeeper (jars under /usr/share/java, zookeeper.jar naming its dependencies) is run by
# LocalZooKeeper (`millrace zookeeper start`, the high-availability tests) on a private port;
# the package is installed when zookeeper.jar is absent (not zookeeperd: no system service).
# Chromium (/usr/bin/chromium) runs the dashboard's browser tests (tests/browser), driven by
# Playwright from the test extra; Playwright's own browser download is never used.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || need+=(postgresql)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != "0" ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
