#!/usr/bin/env bash
# Installs the Debian packages shiro's tests use, when any is missing.
set -euo pipefail

need=()
check() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
check rg ripgrep
check git git
check debootstrap debootstrap
check tmux tmux
check busybox busybox-static
check pgrep procps
check curl curl
check sshd openssh-server
check docker-registry docker-registry

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${need[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "missing packages: ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
