#!/usr/bin/env python3
"""Exercise 2's solution: the routes of every switch of a k-ary fat tree, written by hand with
`ip route` from what the lab's topology file says (its nodes, ports and addresses).

    python3 routes.py LAB [--one-uplink]

Edge switch: its hosts are connected routes; everything else (10.0.0.0/8) goes up over every
uplink. Aggregation switch: each edge of its pod below it by a /24 down; the rest up over every
uplink. Core switch: each pod (10.P.0.0/16) down the one port towards it. With --one-uplink
every upward route uses only the first uplink (the broken example).
"""
import json
import subprocess
import sys


def ip_route(lab, switch, prefix, gateways):
    hops = []
    if len(gateways) == 1:
        hops = ["via", gateways[0]]
    else:
        for gateway in gateways:
            hops += ["nexthop", "via", gateway]
    subprocess.run(
        ["ip", "-n", f"ofan-{lab}-{switch}", "route", "replace", prefix] + hops, check=True
    )


def main():
    lab = sys.argv[1]
    one_uplink = "--one-uplink" in sys.argv[2:]
    with open(f"/run/ofan/labs/{lab}/topo.json") as file:
        topology = json.load(file)
    nodes = topology["nodes"]

    def gateway(port):
        """The neighbour's address on the port's link: the next hop."""
        return nodes[port["peer"]]["ports"][port["peer_port"]]["address"]

    def host_net(node, length):
        """The /24 (length 24) or /16 (length 16) of the hosts below an edge or in a pod."""
        octets = node["loopback"].split(".")
        if length == 24:
            return f"{octets[0]}.{octets[1]}.{octets[2]}.0/24"
        return f"{octets[0]}.{octets[1]}.0.0/16"

    def a_host_below(switch):
        """A host under an edge switch (its own addresses are not in the hosts' space)."""
        for port in switch["ports"]:
            peer = nodes[port["peer"]]
            if port["direction"] == "down" and peer["role"] == "host":
                return peer
        raise ValueError(f"{switch['name']} has no host")

    for node in nodes:
        role = node["role"]
        if role == "host":
            continue
        up = [gateway(p) for p in node["ports"] if p["direction"] == "up"]
        if one_uplink:
            up = up[:1]
        down = [p for p in node["ports"] if p["direction"] == "down"]
        if role == "edge":
            ip_route(lab, node["name"], "10.0.0.0/8", up)
        elif role == "aggregation":
            for port in down:
                edge = nodes[port["peer"]]
                ip_route(lab, node["name"], host_net(a_host_below(edge), 24), [gateway(port)])
            ip_route(lab, node["name"], "10.0.0.0/8", up)
        elif role == "core":
            for port in down:
                aggregation = nodes[port["peer"]]
                edge = next(
                    nodes[p["peer"]] for p in aggregation["ports"] if p["direction"] == "down"
                )
                ip_route(lab, node["name"], host_net(a_host_below(edge), 16), [gateway(port)])
        else:
            raise ValueError(f"{node['name']}: this script knows fat trees only")


if __name__ == "__main__":
    main()
