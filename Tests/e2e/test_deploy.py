"""The deployment files are valid for the tools that read them: `nginx -t` (Debian's nginx, with a
throw-away certificate in place of Let's Encrypt's) and `systemd-analyze verify`."""
import os
import subprocess
import tempfile

from conftest import BINARY, ROOT


def nginx_site(name, replacements=()):
    """A Deploy/ nginx file made runnable here: a throwaway certificate in place of Let's Encrypt's,
    logs and state in a temporary folder. Returns (folder, path of the main nginx.conf)."""
    work = tempfile.mkdtemp(prefix="keyfob-nginx-")
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=login.example.com"], check=True, capture_output=True)
    site = open(os.path.join(ROOT, "Deploy", name)).read()
    site = site.replace("/etc/letsencrypt/live/login.example.com/fullchain.pem", cert)
    site = site.replace("/etc/letsencrypt/live/login.example.com/privkey.pem", key)
    site = site.replace("/var/log/nginx/", work + "/")
    for old, new in replacements:
        assert old in site, old
        site = site.replace(old, new)
    with open(os.path.join(work, "keyfob.conf"), "w") as f:
        f.write(site)
    with open(os.path.join(work, "nginx.conf"), "w") as f:
        f.write(f"pid {work}/nginx.pid;\nerror_log {work}/error.log;\nevents {{}}\n"
                f"http {{ access_log off; client_body_temp_path {work}; proxy_temp_path {work}; include {work}/keyfob.conf; }}\n")
    return work, os.path.join(work, "nginx.conf")


def test_the_nginx_configs_pass_nginx_t():
    for name in ("nginx.conf", "multi/nginx-upstream.conf"):
        _, conf = nginx_site(name)
        result = subprocess.run(["nginx", "-t", "-c", conf], capture_output=True, text=True)
        assert result.returncode == 0, (name, result.stderr)


def test_the_systemd_unit_passes_systemd_analyze_verify():
    unit = open(os.path.join(ROOT, "Deploy", "keyfob.service")).read()
    assert "ExecStart=/opt/keyfob/keyfob serve" in unit
    work = tempfile.mkdtemp(prefix="keyfob-unit-")
    path = os.path.join(work, "keyfob.service")
    with open(path, "w") as f:
        f.write(unit.replace("/opt/keyfob/keyfob", BINARY))
    result = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for setting in ("ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes", "StateDirectory=keyfob", "LimitNOFILE="):
        assert setting in unit


def test_the_instance_template_passes_systemd_analyze_verify():
    unit = open(os.path.join(ROOT, "Deploy", "multi", "keyfob@.service")).read()
    assert "ExecStart=/opt/keyfob/keyfob serve --port %i" in unit and "EnvironmentFile=/etc/keyfob/keyfob.env" in unit
    work = tempfile.mkdtemp(prefix="keyfob-unit-")
    env = os.path.join(work, "keyfob.env")
    with open(env, "w") as f:
        f.write("KEYFOB_DATABASE=postgres://keyfob:x@127.0.0.1/keyfob\n")
    path = os.path.join(work, "keyfob@8081.service")
    with open(path, "w") as f:
        f.write(unit.replace("/opt/keyfob/keyfob", BINARY).replace("/etc/keyfob/keyfob.env", env))
    result = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
