"""#59: one Extension/ source builds for Chromium and for Firefox. Both manifests are checked the way
a browser's loader reads them (the Manifest V3 keys each browser requires, every file they name
present, nothing one of them refuses), and the .zip and .xpi hold exactly the built folders."""
import json
import os
import re
import subprocess
import tempfile
import zipfile

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def build(server="https://keyfob.example"):
    out = os.path.join(tempfile.mkdtemp(prefix="keyfob-ext-build-"), "keyfob")
    subprocess.run([os.path.join(ROOT, "scripts", "build-extension.sh"), server, out], check=True, capture_output=True)
    return out


def manifest(folder):
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f)


def named_files(m):
    """Every file a manifest names."""
    files = set(m.get("icons", {}).values()) | set(m["action"].get("default_icon", {}).values()) | {m["action"]["default_popup"]}
    for script in m["content_scripts"]:
        files |= set(script["js"])
    background = m["background"]
    files |= set(background.get("scripts", [])) | ({background["service_worker"]} if "service_worker" in background else set())
    return files


def common_checks(folder, m):
    assert m["manifest_version"] == 3 and m["name"] == "Keyfob" and re.fullmatch(r"\d+(\.\d+){0,3}", m["version"])
    missing = [name for name in named_files(m) if not os.path.isfile(os.path.join(folder, name))]
    assert missing == [], missing
    # The page's world gets only inpage.js (window.nostr, injectedWeb3); the bridge stays isolated.
    worlds = {tuple(s["js"]): s.get("world", "ISOLATED") for s in m["content_scripts"]}
    assert worlds == {("inpage.js",): "MAIN", ("config.js", "content.js"): "ISOLATED"}, worlds
    assert set(m["permissions"]) == {"storage", "activeTab"}, m["permissions"]
    # No page may message the extension: it is connected through its own content script (claim).
    assert "externally_connectable" not in m
    with open(os.path.join(folder, "config.js")) as f:
        assert 'const KEYFOB_DEFAULT_SERVER = "https://keyfob.example";' in f.read()


def test_one_source_builds_for_chromium_and_firefox():
    out = build()
    chromium, firefox = manifest(out), manifest(out + "-firefox")
    common_checks(out, chromium)
    common_checks(out + "-firefox", firefox)
    # Chromium: an extension service worker, which imports config.js itself; no Firefox keys.
    assert chromium["background"] == {"service_worker": "background.js"}
    assert "browser_specific_settings" not in chromium
    # Firefox: background scripts (it has no extension service worker), config.js first; an add-on
    # id, and a minimum version that runs world "MAIN" content scripts (128), on Android too.
    assert firefox["background"] == {"scripts": ["config.js", "background.js"]}
    gecko = firefox["browser_specific_settings"]["gecko"]
    assert re.fullmatch(r"[a-z0-9.-]+@[a-z0-9.-]+", gecko["id"]) and int(gecko["strict_min_version"].split(".")[0]) >= 128
    assert int(firefox["browser_specific_settings"]["gecko_android"]["strict_min_version"].split(".")[0]) >= 128
    # Everything else is the same extension.
    same = {k: v for k, v in chromium.items() if k not in ("background",)}
    assert {k: v for k, v in firefox.items() if k not in ("background", "browser_specific_settings")} == same
    # The packages hold exactly the folders, byte for byte.
    for package, folder in ((out + ".zip", out), (out + ".xpi", out + "-firefox")):
        with zipfile.ZipFile(package) as z:
            assert sorted(z.namelist()) == sorted(os.listdir(folder)), (package, z.namelist())
            for name in z.namelist():
                with open(os.path.join(folder, name), "rb") as f:
                    assert z.read(name) == f.read(), name
    # The scripts use the one extension API name both browsers give (config.js: browser, else chrome).
    for name in ("background.js", "content.js", "popup.js"):
        with open(os.path.join(out, name)) as f:
            assert not re.search(r"\bchrome\.(runtime|storage|tabs|windows)", f.read()), name
