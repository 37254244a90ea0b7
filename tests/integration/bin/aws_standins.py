#!/usr/bin/env python3
# Stand-ins for the AWS services kpipe asks for credentials, and a proxy in
# front of the local Kinesis, for tests/integration/kinesis_credentials.sh.
# kinesis-mock checks no signature, so the only way to see which
# credentials kpipe chose is to look at the requests on the wire: each
# stand-in writes what it was sent as JSON lines to LOG.
#
#   aws_standins.py proxy LOG UPSTREAM [REFUSED_KEY_ID]
#       forwards every request, unchanged, to UPSTREAM (kinesis-mock's URL)
#       and returns its answer; logs the X-Amz-Target, the access key id
#       and region of the Authorization header's Credential=, and the
#       X-Amz-Security-Token (null when absent). A request signed with
#       REFUSED_KEY_ID is refused as Kinesis refuses unknown keys, instead.
#   aws_standins.py hold LOG UPSTREAM ACTION N
#       as proxy, but the Nth request for ACTION ("PutRecords") is
#       forwarded and never answered: once UPSTREAM has answered it, a line
#       "held ACTION N" is printed, and the caller waits forever (for
#       lib.sh's kill_held_replay: a replay killed after its records were
#       written and before it learnt so).
#   aws_standins.py sts LOG CREDENTIALS.json [refuse]
#       STS's AssumeRoleWithWebIdentity (form-encoded POST), answering the
#       keys of CREDENTIALS.json ({"AccessKeyId", "SecretAccessKey",
#       "SessionToken"}) in STS's XML, or with "refuse", STS's AccessDenied
#       error; logs the action, role, session name and web identity token.
#   aws_standins.py imds LOG CREDENTIALS.json ROLE METADATA_TOKEN
#       the EC2 instance metadata service, version 2 only: a PUT of
#       /latest/api/token gives METADATA_TOKEN, and GETs without it are
#       refused (401), as IMDSv2 refuses them; ROLE's credentials are
#       CREDENTIALS.json ({"AccessKeyId", "SecretAccessKey", "Token"}).
#
# Each listens on a free loopback port (port 0: no collision with another
# test) and prints its URL, http://127.0.0.1:PORT, as its one line of
# output once it accepts connections: reading it is the test's wait.
import datetime
import http.client
import http.server
import json
import re
import sys
import threading
import urllib.parse
from xml.sax.saxutils import escape

# Headers of one connection, not of the request: never forwarded.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-connection"}


def expiration():
    # An hour ahead, as STS and IMDS give: far from kpipe's renewal margin
    # (5 minutes), so that one run asks once.
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Handler(http.server.BaseHTTPRequestHandler):
    # Keep-alive, as libcurl uses it: every answer has a Content-Length.
    protocol_version = "HTTP/1.1"
    log_path = None

    def log_message(self, *args):
        pass  # what matters goes to LOG; stderr stays for real failures

    def record(self, entry):
        # Opened per request, appended, closed: the test may empty LOG
        # between its cases while the stand-in runs.
        with open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, status, body, content_type, headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Proxy(Handler):
    upstream = None
    refused = None
    hold_action = None  # hold: the action whose Nth request is held
    hold_at = 0
    seen = 0
    lock = threading.Lock()

    def do_POST(self):
        body = self.body()
        auth = self.headers.get("Authorization") or ""
        # "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request, ..."
        m = re.search(r"Credential=([^/,\s]*)/[^/]*/([^/]*)/([^/]*)/", auth)
        self.record({
            "target": self.headers.get("X-Amz-Target"),
            "key_id": m.group(1) if m else None,
            "region": m.group(2) if m else None,
            "service": m.group(3) if m else None,
            "token": self.headers.get("X-Amz-Security-Token"),
        })
        if m and m.group(1) == self.refused:
            self.answer(400, json.dumps({
                "__type": "UnrecognizedClientException",
                "message": "The security token included in the request is invalid."}),
                "application/x-amz-json-1.1")
            return
        # One connection to kinesis-mock per request: simple, and loopback.
        up = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            up.request("POST", self.path, body=body, headers=headers)
            r = up.getresponse()
            data = r.read()
            target = self.headers.get("X-Amz-Target") or ""
            if self.hold_action and target.endswith("." + self.hold_action):
                with Proxy.lock:
                    Proxy.seen += 1
                    held = Proxy.seen == self.hold_at
                if held:
                    print(f"held {self.hold_action} {self.hold_at}", flush=True)
                    threading.Event().wait()
            # send_response gives Date and Server; answer() the length and type.
            passed = [(k, v) for k, v in r.getheaders() if k.lower() not in HOP_BY_HOP
                      and k.lower() not in ("content-length", "content-type", "date", "server")]
            self.answer(r.status, data, r.getheader("Content-Type") or "application/x-amz-json-1.1", passed)
        finally:
            up.close()


class Sts(Handler):
    credentials = None
    refuse = False

    def do_POST(self):
        form = urllib.parse.parse_qs(self.body().decode(), keep_blank_values=True)
        one = lambda k: form.get(k, [None])[0]
        self.record({
            "path": self.path,
            "content_type": self.headers.get("Content-Type"),
            "action": one("Action"),
            "version": one("Version"),
            "role_arn": one("RoleArn"),
            "session": one("RoleSessionName"),
            "token": one("WebIdentityToken"),
        })
        if self.refuse or one("Action") != "AssumeRoleWithWebIdentity":
            # STS's error document, as it sends it for a token it rejects.
            self.answer(403, """<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error>
    <Type>Sender</Type>
    <Code>AccessDenied</Code>
    <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>
  </Error>
  <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
</ErrorResponse>
""", "text/xml")
            return
        c = self.credentials
        # The shape real STS answers with (its API reference's example):
        # the keys are not the only elements, nor first.
        self.answer(200, f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:kpipe</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>{escape(one("RoleArn") or "")}/{escape(one("RoleSessionName") or "")}</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:{escape(one("RoleSessionName") or "")}</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>{escape(c["SessionToken"])}</SessionToken>
      <SecretAccessKey>{escape(c["SecretAccessKey"])}</SecretAccessKey>
      <Expiration>{expiration()}</Expiration>
      <AccessKeyId>{escape(c["AccessKeyId"])}</AccessKeyId>
    </Credentials>
    <Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.example</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
""", "text/xml")


class Imds(Handler):
    credentials = None
    role = None
    token = None
    prefix = "/latest/meta-data/iam/security-credentials/"

    def do_PUT(self):
        self.body()
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self.record({"method": "PUT", "path": self.path, "ttl": ttl})
        if self.path != "/latest/api/token":
            self.answer(404, "", "text/plain")
        elif not ttl:
            self.answer(400, "", "text/plain")  # IMDSv2 wants the TTL
        else:
            self.answer(200, self.token, "text/plain", [("X-aws-ec2-metadata-token-ttl-seconds", ttl)])

    def do_GET(self):
        sent = self.headers.get("X-aws-ec2-metadata-token")
        self.record({"method": "GET", "path": self.path, "token": sent})
        if sent != self.token:
            self.answer(401, "", "text/plain")
        elif self.path == self.prefix:
            self.answer(200, self.role, "text/plain")
        elif self.path == self.prefix + self.role:
            c = self.credentials
            self.answer(200, json.dumps({
                "Code": "Success",
                "LastUpdated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Type": "AWS-HMAC",
                "AccessKeyId": c["AccessKeyId"],
                "SecretAccessKey": c["SecretAccessKey"],
                "Token": c["Token"],
                "Expiration": expiration(),
            }, indent=2), "text/plain")
        else:
            self.answer(404, "", "text/plain")


def main(argv):
    role, log = argv[1], argv[2]
    if role == "proxy":
        handler = Proxy
        handler.upstream = urllib.parse.urlsplit(argv[3])
        handler.refused = argv[4] if len(argv) > 4 else None
    elif role == "hold":
        handler = Proxy
        handler.upstream = urllib.parse.urlsplit(argv[3])
        handler.hold_action, handler.hold_at = argv[4], int(argv[5])
    elif role == "sts":
        handler = Sts
        with open(argv[3]) as f:
            handler.credentials = json.load(f)
        handler.refuse = len(argv) > 4 and argv[4] == "refuse"
    elif role == "imds":
        handler = Imds
        with open(argv[3]) as f:
            handler.credentials = json.load(f)
        handler.role, handler.token = argv[4], argv[5]
    else:
        sys.exit(f"aws_standins.py: unknown stand-in '{role}'")
    handler.log_path = log
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv)
