"""Several hosts on one machine for the tests: network namespaces joined by a bridge.

:class:`VirtualNetwork` makes a switch namespace holding a Linux bridge and, for every host, a
namespace of its own with one veth pair: ``eth0`` in the host (its one address on a private
/24 and its loopback) and the other end on the bridge. The test process (the root namespace)
gets one more veth on the bridge with the subnet's ``.254``, so it reaches every host, as a
client on the network would. :meth:`VirtualNetwork.cut` takes a host's link down at the switch
(a cable pulled) and :meth:`VirtualNetwork.restore` brings it back. Processes run in a host with
:meth:`VirtualNetwork.command` (``ip netns exec``, which execs: the PID is the process's).
Closing deletes the namespaces (and with them every veth); it needs root (CAP_NET_ADMIN), and a
machine without it fails the tests that need it (``tests.real_parts``).
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from dataclasses import dataclass, field

from tests.real_parts import part_unavailable

__all__ = ["VirtualNetwork"]


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.231-10.238.x.0 that no route of this machine uses."""
    listed = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, timeout=30)
    used = [
        ipaddress.ip_network(r.split()[0], strict=False)
        for r in listed.stdout.splitlines()
        if r[:1].isdigit()
    ]
    for second in range(231, 239):
        for third in range(os.getpid() % 200, 256):
            subnet = ipaddress.ip_network(f"10.{second}.{third}.0/24")
            if not any(subnet.overlaps(u) for u in used):
                return subnet
    raise RuntimeError("no free private /24 for the test network")


@dataclass
class VirtualNetwork:
    """A bridge and hosts in network namespaces; the test process on the bridge too.

    Raises:
        pytest.fail.Exception: From ``start``, if namespaces cannot be made (not root).
    """

    tag: str = field(default_factory=lambda: f"mr{os.getpid() % 100000}")
    hosts: dict[str, str] = field(default_factory=dict)  # name -> address

    def start(self) -> VirtualNetwork:
        self.subnet = _free_subnet()
        self.switch = f"{self.tag}-sw"
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            self._plug(f"{self.tag}r", None)  # the test process's own port on the bridge
            _ip("addr", "add", f"{self.subnet[254]}/24", "dev", f"{self.tag}r")
            _ip("link", "set", f"{self.tag}r", "up")
        except (RuntimeError, OSError) as error:
            self.close()
            part_unavailable("network namespaces (ip netns, root)", error)
        return self

    @property
    def client_address(self) -> str:
        """The test process's address on the network."""
        return str(self.subnet[254])

    def add_host(self, name: str) -> str:
        """A host ``name`` (its namespace, its link, loopback up); returns its address."""
        address = str(self.subnet[len(self.hosts) + 1])
        namespace = self.namespace(name)
        _ip("netns", "add", namespace)
        self._plug(f"{self.tag}{len(self.hosts)}", namespace)
        inside = ["-n", namespace]
        _ip(*inside, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")
        self.hosts[name] = address
        return address

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def command(self, name: str, args: list[str]) -> list[str]:
        """``args`` run in host ``name``."""
        return ["ip", "netns", "exec", self.namespace(name), *args]

    def cut(self, name: str) -> None:
        """Take host ``name``'s link down at the switch: nothing reaches it, nothing leaves."""
        _ip("-n", self.switch, "link", "set", self._port(name), "down")

    def restore(self, name: str) -> None:
        """Bring host ``name``'s link back up."""
        _ip("-n", self.switch, "link", "set", self._port(name), "up")

    def close(self) -> None:
        """Delete every namespace (their veths go with them) and the test process's port."""
        for args in [
            *(["netns", "del", self.namespace(name)] for name in self.hosts),
            ["link", "del", f"{self.tag}r"],  # gone with the switch already, unless half made
            ["netns", "del", f"{self.tag}-sw"],
        ]:
            subprocess.run(["ip", *args], capture_output=True, timeout=30)
        self.hosts.clear()

    def _port(self, name: str) -> str:
        return f"{self.tag}{list(self.hosts).index(name)}b"

    def _plug(self, veth: str, namespace: str | None) -> None:
        """A veth pair ``veth`` / ``veth + 'b'``: the first in ``namespace`` as ``eth0`` (or
        left in the root namespace), the second on the bridge."""
        _ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}b")
        _ip("link", "set", f"{veth}b", "netns", self.switch)
        _ip("-n", self.switch, "link", "set", f"{veth}b", "master", "br0")
        _ip("-n", self.switch, "link", "set", f"{veth}b", "up")
        if namespace is not None:
            _ip("link", "set", veth, "netns", namespace)
            _ip("-n", namespace, "link", "set", veth, "name", "eth0")
