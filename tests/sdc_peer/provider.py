#!/usr/bin/env python3
"""SDC test provider playing one ward ECG monitor (IEEE 11073 SDC, via sdc11073 3.0).

    python3 tests/sdc_peer/provider.py --port 50123 --samples /tmp/ecg500.json \
        [--vt-at 5 40 ...] [--hz 250|500] [--host 127.0.0.1] [--epr urn:uuid:...] \
        [--devices N [--vt-stagger SECS]]

* MDIB: tests/sdc_peer/ecg_monitor_mdib.xml (handles ecg.ii, ecg.v, hr, spo2, ac.vt, as.vt.aud).
  The descriptors' SamplePeriod is rewritten to match --hz before the MDIB is loaded.
* Plays FILE.json ({"II": [mV...], "V": [mV...]}, assumed to be at --hz) in real time as
  WaveformStream notifications (both leads in one report, every --chunk-ms, default 100 ms),
  looping at the end. DeterminationTime of each chunk = wall-clock time of its first sample,
  computed from the start time and the sample index, so there is no drift or jitter.
* Sets heart rate (hr) and SpO2 (spo2) every second (EpisodicMetricReport).
* At each --vt-at SECS after the ready line, sets AlertConditionState ac.vt Presence=true
  (and AlertSignal as.vt.aud Presence=On), and clears both --vt-len seconds (default 10) later
  (EpisodicAlertReport). HR reads 180 while VT is present.
* No WS-Discovery at all: a stub object that satisfies sdc11073's WsDiscoveryProtocol is used
  (no UDP socket, no multicast, no Hello). The consumer must be given the XAddr directly.
* HTTP is bound to HOST:PORT (PORT 0 = let the OS choose); --bind-host B binds B:PORT
  but still advertises HOST:PORT in the XAddr and all service/subscription-manager addresses.
* --tls-dir DIR: HTTPS with mutual TLS instead (sdc11073's certloader: DIR/userkey.pem,
  usercert.pem, cacert.pem; the device asks its consumers for a certificate cacert.pem signed,
  and checks the sink's against it too, without its host name, as sdc11073 does).
* --devices N hosts N monitors in this process (a ward for `holmes bench --sdc`), each with its
  own MDIB and HTTP server (PORT + i, or the OS's choice with --port 0); device i (counted
  from --first-index) plays FILE from its own place and raises its VT i * --vt-stagger seconds
  later; with --vt-after-go the VT times count from a line "go" on stdin.
* Once ready, prints exactly one JSON line to stdout: {"xaddr": "...", "epr": "...", "devices":
  [{"xaddr", "epr", "port"} per device]} (xaddr and epr: the first device's).
  Events (VT raised/cleared) are logged as JSON lines on stderr.
* SIGTERM / SIGINT: sends SubscriptionEnd to subscribers, closes the server, exits 0.
* Misbehaving, for tests: --lead-v-code CODE gives lead V another code (one Holmes does not
  know: that lead is left out); --mangle-every K cuts every K-th notification in half (XML that
  does not parse), --huge-every K pads every K-th past 600 kB (the sink refuses it, 413).
* --commlog DIR: also write every SOAP message the provider receives/sends into DIR
  (sdc11073.commlog.DirectoryLogger; one file per message, body only, no HTTP headers).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import signal
import sys
import threading
import time
import uuid
import warnings
from decimal import Decimal
from pathlib import Path

from sdc11073.definitions_sdc import SdcV1Definitions
from sdc11073.httpserver.httpserverimpl import HttpServerThreadBase, _ThreadingHTTPServer
from sdc11073.mdib import ProviderMdib
from sdc11073.provider import SdcProvider
from sdc11073.xml_types import pm_types
from sdc11073.xml_types.dpws_types import ThisDeviceType, ThisModelType

HERE = Path(__file__).resolve().parent
DEFAULT_MDIB = HERE / 'ecg_monitor_mdib.xml'

H_II, H_V, H_HR, H_SPO2 = 'ecg.ii', 'ecg.v', 'hr', 'spo2'
H_VT_COND, H_VT_SIG = 'ac.vt', 'as.vt.aud'


class NoDiscovery:
    """Implements sdc11073's WsDiscoveryProtocol without any networking (no UDP, no multicast).

    SdcProvider only needs .active_address (the IP it binds to and puts in its XAddr),
    .publish_service (only called by SdcProvider.publish / set_location, which we never call)
    and .clear_service (called by stop_all).
    """

    def __init__(self, address: str):
        self._address = address

    @property
    def active_address(self) -> str:
        return self._address

    def publish_service(self, epr, types, scopes, x_addrs):  # noqa: ANN001
        pass

    def clear_service(self, epr):  # noqa: ANN001
        pass


class _ReusingHTTPServer(_ThreadingHTTPServer):
    allow_reuse_address = True


class FixedPortHttpServer(HttpServerThreadBase):
    """sdc11073's HttpServerThreadBase always binds port 0; this one binds the given port."""

    def __init__(self, host: str, port: int, logger: logging.Logger, supported_encodings: list[str],
                 ssl_context=None):  # noqa: ANN001
        super().__init__(my_ipaddress=host, ssl_context=ssl_context, supported_encodings=supported_encodings,
                         logger=logger)
        self._port = port

    def run(self):
        self._stop_requested = False
        try:
            self.httpd = _ReusingHTTPServer(self.logger, (self._my_ipaddress, self._port), self.chunk_size,
                                            self.supported_encodings)
            if self._ssl_context:
                self.httpd.socket = self._ssl_context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = 'https' if self._ssl_context else 'http'
            self.base_url = f'{scheme}://{self._my_ipaddress}:{self.server_port}/'
            self.started_evt.set()
            self.httpd.serve_forever()
        except Exception:
            if not self._stop_requested:
                self.logger.exception('http server thread aborted')
            self.bind_error = sys.exc_info()[1]
            self.started_evt.set()  # unblock the waiter; it checks httpd
            raise


def event(**kw) -> None:
    kw.setdefault('t', round(time.time(), 3))
    print(json.dumps(kw), file=sys.stderr, flush=True)


def load_mdib(path: Path, hz: int, lead_v_code: str | None = None) -> ProviderMdib:
    xml = path.read_bytes()
    if lead_v_code:
        xml = xml.replace(b'Code="131331"', f'Code="{lead_v_code}"'.encode())
    period = {500: 'PT0.002S', 250: 'PT0.004S'}[hz]
    xml = xml.replace(b'SamplePeriod="PT0.002S"', f'SamplePeriod="{period}"'.encode())
    return ProviderMdib.from_string(xml, protocol_definition=SdcV1Definitions)


def load_samples(path: str) -> tuple[list[Decimal], list[Decimal]]:
    with open(path) as f:
        data = json.load(f)
    def dec(x: float) -> Decimal:
        d = Decimal(f'{float(x):.3f}')
        return d if d != 0 else Decimal(0)  # avoid "-0" on the wire

    ii = [dec(x) for x in data['II']]
    v = [dec(x) for x in data['V']]
    if not ii or len(ii) != len(v):
        raise SystemExit(f'{path}: "II" and "V" must be non-empty lists of equal length')
    return ii, v


class _Spoil:
    """A request manipulator (sdc11073's hook) that spoils a notification's bytes."""

    def __init__(self, huge: bool):
        self.huge = huge

    def manipulate_string(self, xml: bytes) -> bytes:
        if self.huge:
            return xml + b'<!--' + b'x' * 600_000 + b'-->'
        return xml[: len(xml) // 2]


def misbehave(mangle_every: int, huge_every: int) -> None:
    """Every mangle_every-th notification this process sends is cut in half, every
    huge_every-th padded past 600 kB (counted over all its devices)."""
    from sdc11073.pysoap import soapclient_async  # noqa: PLC0415

    original = soapclient_async.SoapClientAsync.async_post_message_to
    count = [0]

    async def post(self, path, created_message, request_manipulator=None):  # noqa: ANN001
        count[0] += 1
        k = count[0]
        if mangle_every and k % mangle_every == 0:
            request_manipulator = _Spoil(huge=False)
            event(ev='mangled', n=k)
        elif huge_every and k % huge_every == 0:
            request_manipulator = _Spoil(huge=True)
            event(ev='huge', n=k)
        return await original(self, path, created_message, request_manipulator)

    soapclient_async.SoapClientAsync.async_post_message_to = post


class Device:
    """One ward monitor: its MDIB, its SdcProvider on its own HTTP server, and what it played."""

    def __init__(self, args, local: int, ii, vv):  # noqa: ANN001
        index = args.first_index + local  # the device's place in the ward
        self.index = index
        self.ii, self.vv = ii, vv
        self.mdib = load_mdib(Path(args.mdib), args.hz, args.lead_v_code)
        self.period = 1.0 / args.hz
        port = args.port + local if args.port else 0
        if args.epr and args.devices == 1 and args.first_index == 0:
            base = args.epr.removeprefix('urn:uuid:')
            epr = uuid.UUID(base) if args.epr.startswith('urn:uuid:') else args.epr
        elif args.epr:
            epr = uuid.uuid5(uuid.UUID(args.epr.removeprefix('urn:uuid:')), str(index))
        else:
            epr = uuid.uuid4()
        self.provider = SdcProvider(
            NoDiscovery(args.host),
            ThisModelType(manufacturer='Holmes test peer', manufacturer_url='http://localhost/',
                          model_name='SimECG', model_number='1', model_url='http://localhost/model',
                          presentation_url='http://localhost/presentation'),
            ThisDeviceType(friendly_name='SimECG ward monitor', firmware_version='1.0',
                           serial_number=f'SIM-{index + 1:04d}'),
            self.mdib,
            epr=epr,
            validate=not args.no_validate,
            ssl_context_container=args.ssl,  # None: plain HTTP
            max_subscription_duration=args.max_subscription_duration,
        )
        if args.gzip_only:
            self.provider.set_used_compression('gzip')
        from sdc11073.httpserver import compression  # noqa: PLC0415
        encodings = ['gzip'] if args.gzip_only else compression.CompressionHandler.available_encodings[:]
        self.http = FixedPortHttpServer(args.bind_host or args.host, port,
                                        logging.getLogger('sdc.device.httpsrv'), encodings,
                                        args.ssl.server_context if args.ssl else None)
        self.http.start()
        if not self.http.started_evt.wait(30) or self.http.httpd is None or not self.http.is_alive():
            raise SystemExit(f'could not bind HTTP server to {args.bind_host or args.host}:{port}')
        self.provider.start_all(start_rtsample_loop=False, shared_http_server=self.http)
        # initial numeric values, so that GetMdib already carries them
        with self.mdib.metric_state_transaction() as tr:
            for handle, value in ((H_HR, 72), (H_SPO2, 97)):
                st = tr.get_state(handle)
                if st.MetricValue is None:
                    st.mk_metric_value()
                st.MetricValue.Value = Decimal(value)
                st.MetricValue.MetricQuality.Validity = pm_types.MeasurementValidity.VALID
        self.xaddr = self.provider.get_xaddrs()[0]
        # VT on/off edges as (seconds after start, presence); device i's shifted by i * stagger
        shift = index * args.vt_stagger
        self.edges = sorted([(s + shift, True) for s in args.vt_at]
                            + [(s + shift + args.vt_len, False) for s in args.vt_at])
        self.vt_present = False
        self.sent = 0  # samples sent so far (per lead)
        # each device starts its signal at its own place, so that a ward's beds differ
        self.offset = (index * args.hz * 7) % len(ii)
        self.t0 = 0.0
        self.next_numeric = 0.0

    def start(self, t0: float) -> None:
        self.t0 = t0
        self.vt_t0 = t0
        self.next_numeric = t0 + 1.0

    def set_vt(self, present: bool) -> None:
        with self.mdib.alert_state_transaction() as tr:
            cond = tr.get_state(H_VT_COND)
            cond.ActivationState = pm_types.AlertActivation.ON
            cond.Presence = present  # DeterminationTime is set by the transaction on change
            sig = tr.get_state(H_VT_SIG)
            sig.ActivationState = pm_types.AlertActivation.ON
            sig.Presence = pm_types.AlertSignalPresence.ON if present else pm_types.AlertSignalPresence.OFF
        event(ev='vt', device=self.index, presence=present)

    def tick(self, now: float) -> None:
        # VT edges
        while self.edges and self.vt_t0 is not None and now - self.vt_t0 >= self.edges[0][0]:
            _, present = self.edges.pop(0)
            if present != self.vt_present:
                self.vt_present = present
                self.set_vt(present)
        # waveforms: everything whose sample time has passed
        due = int((now - self.t0) / self.period) - self.sent
        n = len(self.ii)
        if due > 0:
            idx = [(self.offset + self.sent + k) % n for k in range(due)]
            with self.mdib.rt_sample_state_transaction() as tr:
                for handle, data in ((H_II, self.ii), (H_V, self.vv)):
                    st = tr.get_state(handle)
                    if st.MetricValue is None:
                        st.mk_metric_value()
                    st.MetricValue.Samples = [data[i] for i in idx]
                    st.MetricValue.DeterminationTime = self.t0 + self.sent * self.period  # first sample
                    st.MetricValue.MetricQuality.Validity = pm_types.MeasurementValidity.VALID
                    st.ActivationState = pm_types.ComponentActivation.ON
            self.sent += due
        # numerics once per second
        if now >= self.next_numeric:
            self.next_numeric += 1.0
            hr = 180 + round(3 * math.sin(now)) if self.vt_present else 72 + round(2 * math.sin(now / 7))
            spo2 = 97 + round(math.sin(now / 11))
            with self.mdib.metric_state_transaction() as tr:
                for handle, value in ((H_HR, hr), (H_SPO2, spo2)):
                    st = tr.get_state(handle)
                    st.MetricValue.Value = Decimal(value)

    def stop(self) -> None:
        try:
            self.provider.stop_all(send_subscription_end=True)
        finally:
            self.http.stop()


def main() -> int:  # noqa: C901, PLR0915
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, required=True,
                    help='HTTP port (0 = OS chooses); with --devices N, device i takes PORT + i')
    ap.add_argument('--devices', type=int, default=1, help='monitors hosted by this process (default 1)')
    ap.add_argument('--first-index', type=int, default=0,
                    help="this process's first device's place in the ward (its signal offset, VT "
                         'stagger, serial number and name under --epr follow it; default 0)')
    ap.add_argument('--vt-after-go', action='store_true',
                    help='count --vt-at from a line "go" on stdin rather than from the start')
    ap.add_argument('--host', default='127.0.0.1', help='IP to bind and to put in the XAddr (default 127.0.0.1)')
    ap.add_argument('--bind-host', default=None,
                    help='bind HTTP here instead of --host, still advertising --host (e.g. behind a logging proxy)')
    ap.add_argument('--samples', required=True, help='JSON file {"II": [mV...], "V": [mV...]} at --hz')
    ap.add_argument('--hz', type=int, default=500, choices=(250, 500))
    ap.add_argument('--vt-at', type=float, nargs='+', action='extend', default=[], metavar='SECS',
                    help='raise the VT alert condition SECS after start (repeatable)')
    ap.add_argument('--vt-len', type=float, default=10.0, help='seconds until VT is cleared (default 10)')
    ap.add_argument('--vt-stagger', type=float, default=0.0,
                    help='device i raises and clears its VT i * SECS later (default 0)')
    ap.add_argument('--chunk-ms', type=int, default=100, help='waveform report period in ms (default 100)')
    ap.add_argument('--epr', default=None,
                    help='endpoint reference, urn:uuid:... (default: random); with --devices N, '
                         'device i takes the name-based UUID of i under it')
    ap.add_argument('--max-subscription-duration', type=int, default=15,
                    help='max granted subscription duration in s (sdc11073 default 15)')
    ap.add_argument('--mdib', default=str(DEFAULT_MDIB))
    ap.add_argument('--no-validate', action='store_true', help='disable XML schema validation of messages')
    ap.add_argument('--gzip-only', action='store_true', help='offer only gzip compression (default: all known)')
    ap.add_argument('--commlog', default=None, metavar='DIR', help='write all SOAP messages into DIR')
    ap.add_argument('--exit-after', type=float, default=None, metavar='SECS', help='stop after SECS')
    ap.add_argument('--lead-v-code', default=None, metavar='CODE',
                    help='give lead V this MDC code instead of 131331 (MDC_ECG_LEAD_V1)')
    ap.add_argument('--mangle-every', type=int, default=0, metavar='K',
                    help='cut every K-th notification in half (XML that does not parse)')
    ap.add_argument('--huge-every', type=int, default=0, metavar='K',
                    help='pad every K-th notification past 600 kB (with an XML comment)')
    ap.add_argument('--tls-dir', default=None, metavar='DIR',
                    help='HTTPS with mutual TLS: DIR holds userkey.pem, usercert.pem, cacert.pem')
    ap.add_argument('--log-level', default='WARNING')
    args = ap.parse_args()
    args.ssl = None
    if args.tls_dir:
        from sdc11073.certloader import mk_ssl_contexts_from_folder  # noqa: PLC0415
        args.ssl = mk_ssl_contexts_from_folder(args.tls_dir)
    if args.devices < 1:
        raise SystemExit('--devices must be at least 1')

    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level.upper()),
                        format='%(asctime)s %(levelname)s %(name)s: %(message)s')

    comm_logger = None
    if args.commlog:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            from sdc11073 import commlog  # noqa: PLC0415
        comm_logger = commlog.DirectoryLogger(args.commlog, log_out=True, log_in=True)
        comm_logger.start()
        for name in commlog.LOGGER_NAMES:  # keep the message dumps out of stderr
            logging.getLogger(name).propagate = False

    if args.mangle_every or args.huge_every:
        misbehave(args.mangle_every, args.huge_every)
    ii, vv = load_samples(args.samples)
    devices = [Device(args, i, ii, vv) for i in range(args.devices)]

    stop = threading.Event()

    def on_signal(signum, _frame):  # noqa: ANN001
        event(ev='signal', signum=signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0 = time.time()
    for d in devices:
        d.start(t0)
        if args.vt_after_go:
            d.vt_t0 = None

    if args.vt_after_go:
        def wait_for_go() -> None:
            for line in sys.stdin:
                if line.strip() == 'go':
                    now = time.time()
                    for d in devices:
                        d.vt_t0 = now
                    event(ev='go')
                    return

        threading.Thread(target=wait_for_go, daemon=True).start()
    listed = [{'xaddr': d.xaddr, 'epr': d.provider.epr_urn, 'port': d.http.server_port} for d in devices]
    print(json.dumps({'xaddr': listed[0]['xaddr'], 'epr': listed[0]['epr'], 'devices': listed}), flush=True)
    event(ev='ready', devices=len(devices), port=listed[0]['port'], hz=args.hz, samples=len(ii))

    chunk = args.chunk_ms / 1000.0
    next_tick = t0 + chunk
    try:
        while not stop.is_set():
            now = time.time()
            for d in devices:
                d.tick(now)
            if args.exit_after is not None and now - t0 >= args.exit_after:
                break
            next_tick += chunk
            late = time.time() - next_tick
            if late > chunk:  # behind by more than a report: say so, and skip the missed ticks
                event(ev='late', secs=round(late, 3))
                next_tick = time.time()
            stop.wait(max(0.0, next_tick - time.time()))
    finally:
        event(ev='stopping', samples_sent=sum(d.sent for d in devices))
        try:
            for d in devices:
                d.stop()
        finally:
            if comm_logger is not None:
                comm_logger.stop()
        event(ev='stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
