#!/usr/bin/env python3
"""Drives real Firefox (headless, through Marionette) against `pir safebrowsing proxy`.

Usage: check_safebrowsing.py --profile DIR --proxy URL --blocked [PAGE=]URL ... --allowed URL
                             [--port N] [--firefox firefox-esr] [--timeout SECONDS]

The profile (from `pir safebrowsing firefox-profile`) is copied and given a Marionette port.
The script waits until Firefox has fetched the list from the proxy (the proxy's /status
counts updates; if Firefox has not asked within a few seconds, the list manager is told to
update through Firefox's own chrome API), then navigates to each --blocked URL, which must end
on Firefox's blocked page of its kind (PAGE: malwareBlocked, the default, deceptiveBlocked for
phishing, unwantedBlocked: about:blocked?e=PAGE...), and to --allowed, which must load.
Prints one JSON line with the outcome; exits 0 only if all held.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from marionette_driver.marionette import Marionette
from marionette_driver import errors


def proxy_status(proxy):
    with urllib.request.urlopen(proxy.rstrip("/") + "/status", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return {k: int(v) for k, v in (line.split() for line in lines)}


def wait_for(predicate, timeout, step=0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def navigate(client, url):
    """Returns the document Firefox ended on: an error page's about: URI (about:blocked...,
    about:neterror...) or the page's URL."""
    try:
        client.navigate(url)
    except errors.MarionetteException as error:
        text = str(error)
        marker = "Reached error page: "
        if marker in text:
            return text.split(marker, 1)[1].split()[0]
        raise
    return client.execute_script("return document.documentURI;")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--blocked", required=True, action="append")
    parser.add_argument("--allowed", required=True)
    parser.add_argument("--port", type=int, default=2829)
    parser.add_argument("--firefox", default="firefox-esr")
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="pir-firefox-")
    profile = os.path.join(work, "profile")
    shutil.copytree(args.profile, profile)
    with open(os.path.join(profile, "user.js"), "a") as prefs:
        prefs.write('user_pref("marionette.port", %d);\n' % args.port)
        # A quiet test browser: no first-run pages, no updates, no telemetry.
        for name, value in [
            ("browser.shell.checkDefaultBrowser", "false"),
            ("browser.startup.homepage_override.mstone", '"ignore"'),
            ("datareporting.policy.dataSubmissionEnabled", "false"),
            ("toolkit.telemetry.reportingpolicy.firstRun", "false"),
            ("app.update.enabled", "false"),
            ("browser.aboutwelcome.enabled", "false"),
            # Only the profile's own extensions: a system-wide uBlock Origin (Debian's
            # webext-ublock-origin-firefox ships the same URLhaus list) would block the page
            # itself, and the test would prove nothing about Safe Browsing.
            ("extensions.enabledScopes", "5"),
            ("extensions.autoDisableScopes", "15"),
        ]:
            prefs.write('user_pref("%s", %s);\n' % (name, value))
    log = open(os.path.join(work, "firefox.log"), "w")
    firefox = subprocess.Popen(
        [args.firefox, "--headless", "--marionette", "-remote-allow-system-access", "--no-remote", "--profile", profile],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    result = {"updated": False, "blocked": None, "allowed": None}
    ok = False
    try:
        client = Marionette(host="127.0.0.1", port=args.port)
        client.start_session(timeout=args.timeout)
        started = time.time()
        updated = wait_for(lambda: proxy_status(args.proxy)["updates"] >= 1, 10)
        if not updated:
            # Ask Firefox's list manager to update now (what about:url-classifier's button does).
            client.set_context(client.CONTEXT_CHROME)
            client.execute_script(
                """
                const lm = Cc["@mozilla.org/url-classifier/listmanager;1"]
                  .getService(Ci.nsIUrlListManager);
                lm.checkForUpdates(arguments[0]);
                """,
                script_args=[
                    Marionette_pref(client, "browser.safebrowsing.provider.google4.updateURL")
                ],
            )
            client.set_context(client.CONTEXT_CONTENT)
            updated = wait_for(
                lambda: proxy_status(args.proxy)["updates"] >= 1,
                max(1, args.timeout - (time.time() - started)),
            )
        result["updated"] = updated
        # The update is applied shortly after the response arrives.
        time.sleep(2)
        blocked_ok = True
        result["blocked"] = []
        for spec in args.blocked:
            page, url = spec.split("=", 1) if not spec.startswith("http") else ("malwareBlocked", spec)
            reached = navigate(client, url)
            result["blocked"].append(reached)
            blocked_ok = blocked_ok and reached.startswith("about:blocked?e=%s" % page)
        result["allowed"] = navigate(client, args.allowed)
        result["lookups"] = proxy_status(args.proxy)["lookups"]
        ok = (
            updated
            and blocked_ok
            and result["allowed"].rstrip("/") == args.allowed.rstrip("/")
        )
        client.delete_session()
    except Exception as error:  # report, then fail
        result["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        firefox.terminate()
        try:
            firefox.wait(timeout=20)
        except subprocess.TimeoutExpired:
            firefox.kill()
        log.close()
        if not ok:
            with open(os.path.join(work, "firefox.log")) as f:
                result["firefox_log_tail"] = f.read()[-2000:]
        shutil.rmtree(work, ignore_errors=True)
    result["ok"] = ok
    print(json.dumps(result))
    return 0 if ok else 1


def Marionette_pref(client, name):
    client.set_context(client.CONTEXT_CHROME)
    return client.execute_script(
        "return Services.prefs.getCharPref(arguments[0]);", script_args=[name]
    )


if __name__ == "__main__":
    sys.exit(main())
