"""The in-cell half of the gateway: 127.0.0.1:PORT -> the gateway's unix socket, and the agent's keeper.

Standard library only, one file, run by the cell's own ``python3``::

    AMB_GATEWAY_TOKEN=<run token> python3 forwarder.py --socket /tmp/amb-gw-X/gw.sock [--port 0] -- AGENT ARGS...

It listens on 127.0.0.1 (a free port unless ``--port`` is given), exports the base-URL variables of
every convention and the run token as every API key, then starts the agent in its own process
group and waits for it. Meanwhile it long-polls the gateway's ``/amb/v1/run-state``: when the run
ends there (a limit was hit), it ends the agent's process group (SIGTERM, then SIGKILL after
``--grace`` seconds). Its exit status is the agent's (128 + signal when it was ended).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(listener, socket_path, max_open=24):
    slots = threading.BoundedSemaphore(max_open)
    while True:
        slots.acquire()
        try:
            client, _ = listener.accept()
        except OSError:
            slots.release()
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(socket_path)
        except OSError as exc:
            sys.stderr.write(f"amb forwarder: cannot reach the gateway at {socket_path}: {exc}\n")
            client.close()
            upstream.close()
            slots.release()
            continue

        def both(a=client, b=upstream):
            try:
                t = threading.Thread(target=pipe, args=(b, a), daemon=True)
                t.start()
                pipe(a, b)
                t.join()
                a.close()
                b.close()
            finally:
                slots.release()
        threading.Thread(target=both, daemon=True).start()


def run_state(socket_path, token, wait):
    """The gateway's answer to /amb/v1/run-state (None when it cannot be asked)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(wait + 30)
    try:
        conn.connect(socket_path)
        conn.sendall((f"GET /amb/v1/run-state?wait={wait} HTTP/1.1\r\nHost: gateway\r\n"
                      f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n").encode())
        data = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        state = json.loads(data.split(b"\r\n\r\n", 1)[1])
        return state if isinstance(state, dict) and "ended" in state else None  # a refusal: asked again later
    except (OSError, ValueError, IndexError):
        return None
    finally:
        conn.close()


def environment(port, token):
    root = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env.update({
        "AMB_GATEWAY_URL": root,
        "OPENAI_BASE_URL": root + "/v1", "OPENAI_API_BASE": root + "/v1", "OPENAI_API_HOST": root,
        "ANTHROPIC_BASE_URL": root,  # the SDKs and Claude Code add /v1 themselves
        "LITELLM_API_BASE": root + "/v1",
        "OPENAI_API_KEY": token, "ANTHROPIC_API_KEY": token,
    })
    env.pop("AMB_GATEWAY_TOKEN", None)
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--max-open", type=int, default=24)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    token = os.environ.get("AMB_GATEWAY_TOKEN", "")
    if not command or not token:
        parser.error("give the agent's command after -- and the run token in AMB_GATEWAY_TOKEN")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    port = listener.getsockname()[1]
    threading.Thread(target=serve, args=(listener, args.socket, max(1, args.max_open)), daemon=True).start()
    agent = subprocess.Popen(command, env=environment(port, token), start_new_session=True)
    ended = {}

    def stop(signum=signal.SIGTERM, _frame=None):
        try:
            os.killpg(agent.pid, signum)
        except OSError:
            pass

    def watch():
        while agent.poll() is None:
            state = run_state(args.socket, token, 20)
            if state is None:
                time.sleep(1.0)
                continue
            if state.get("ended"):
                ended["reason"] = state.get("reason") or "revoked"
                sys.stderr.write(f"amb forwarder: the gateway ended the run ({ended['reason']}); "
                                 "ending the agent\n")
                stop(signal.SIGTERM)
                try:
                    agent.wait(args.grace)
                except subprocess.TimeoutExpired:
                    stop(signal.SIGKILL)
                return

    threading.Thread(target=watch, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda s, f: (stop(s), sys.exit(128 + s)))
    code = agent.wait()
    stop(signal.SIGKILL)  # what the agent left behind in its group
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
