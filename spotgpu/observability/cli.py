"""``spotgpu observability dashboard|alerts|scrape-config``: print what to import into a monitoring stack."""

from __future__ import annotations

import argparse
import sys

from spotgpu.catalogue import CLOUDS
from spotgpu.cliutil import HOST_PORT, POOL, UserError, add_json_flag, camel_keys, print_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("observability", help="the Grafana dashboard, Prometheus alert rules and per-cloud scrape configs")
    cmds = p.add_subparsers(dest="observability_command", metavar="WHAT", required=True)
    dash = cmds.add_parser("dashboard", help="the Grafana dashboard JSON (import it into Grafana)")
    add_json_flag(dash, "the dashboard (it is JSON either way)")
    dash.set_defaults(func=_dashboard)
    alerts = cmds.add_parser("alerts", help="the Prometheus alert rule file (YAML; --json: the same rules as JSON)")
    add_json_flag(alerts, "the rule groups")
    alerts.set_defaults(func=_alerts)
    scrape = cmds.add_parser("scrape-config", help="scrape config: a Prometheus server's, or a cloud monitoring agent's files")
    scrape.add_argument("--cloud", choices=CLOUDS, default=None,
                        help="the cloud agent's files (CloudWatch agent, Ops Agent, Telegraf to Azure Monitor); "
                             "default: a Prometheus server's scrape_configs")  # fmt: skip
    scrape.add_argument("--pool", type=POOL, default=None,
                        help="with --cloud: the pool the VMs belong to (labels and the CloudWatch log group)")  # fmt: skip
    scrape.add_argument("--target", action="append", type=HOST_PORT, default=None, metavar="HOST:PORT",
                        help="agent endpoint for a Prometheus server (repeatable; default 127.0.0.1:9464)")  # fmt: skip
    scrape.add_argument("--controller-target", action="append", type=HOST_PORT, default=[], metavar="HOST:PORT",
                        help="a long-running controller's endpoint (telemetry.prometheusPort; repeatable)")  # fmt: skip
    add_json_flag(scrape, "{path: content} of the files (or the Prometheus config)")
    scrape.set_defaults(func=_scrape)


def _dashboard(args: argparse.Namespace) -> int:
    from spotgpu.observability import dashboard_text

    sys.stdout.write(dashboard_text())
    return 0


def _alerts(args: argparse.Namespace) -> int:
    import yaml

    from spotgpu.observability import alerts_text

    if args.json:
        print_json(yaml.safe_load(alerts_text()))  # Prometheus' own rule-file keys (rules, for, expr)
    else:
        sys.stdout.write(alerts_text())
    return 0


def _scrape(args: argparse.Namespace) -> int:
    import yaml

    from spotgpu.observability.scrape import AGENT_HOST, AGENT_PORT, agent_files, prometheus_scrape_config

    if args.cloud is None:
        if args.pool is not None:
            raise UserError(f"--pool {args.pool!r}: only the cloud agents' files carry a pool; fix: add --cloud aws|gcp|azure, "
                            "or leave --pool out (a Prometheus server labels targets by what it scrapes)")
        doc = prometheus_scrape_config(args.target or [f"{AGENT_HOST}:{AGENT_PORT}"], args.controller_target)
        if args.json:
            print_json(doc)
        else:
            sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
        return 0
    if args.target or args.controller_target:
        raise UserError("--target/--controller-target: a cloud agent scrapes its own VM's agent; fix: leave them out with "
                        "--cloud, or drop --cloud for a Prometheus server's scrape_configs")
    if args.pool is None:
        raise UserError(f"--pool: missing; the {args.cloud} agent's files name the pool (labels, log group); "
                        f"fix: --cloud {args.cloud} --pool NAME, the pool the VMs belong to")
    files = agent_files(args.cloud, args.pool)
    if args.json:
        print_json(camel_keys({"cloud": args.cloud, "files": files}, names_under=["files"]))
        return 0
    for path, content in files.items():
        sys.stdout.write(f"# --- {path}\n{content}")
    return 0
