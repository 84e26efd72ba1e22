#!/usr/bin/env python3
"""SDC test provider playing one ward ECG monitor (IEEE 11073 SDC, via sdc11073 3.0).

    python3 tests/sdc_peer/provider.py --port 50123 --samples /tmp/ecg500.json \
        [--vt-at 5 40 ...] [--hz 250|500] [--host 127.0.0.1] [--epr urn:uuid:...]

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
* HTTP (no TLS) is bound to HOST:PORT (PORT 0 = let the OS choose); --bind-host B binds B:PORT
  but still advertises HOST:PORT in the XAddr and all service/subscription-manager addresses.
* Once ready, prints exactly one JSON line to stdout: {"xaddr": "...", "epr": "..."}.
  Events (VT raised/cleared) are logged as JSON lines on stderr.
* SIGTERM / SIGINT: sends SubscriptionEnd to subscribers, closes the server, exits 0.
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

    def __init__(self, host: str, port: int, logger: logging.Logger, supported_encodings: list[str]):
        super().__init__(my_ipaddress=host, ssl_context=None, supported_encodings=supported_encodings,
                         logger=logger)
        self._port = port

    def run(self):
        self._stop_requested = False
        try:
            self.httpd = _ReusingHTTPServer(self.logger, (self._my_ipaddress, self._port), self.chunk_size,
                                            self.supported_encodings)
            self.base_url = f'http://{self._my_ipaddress}:{self.server_port}/'
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


def load_mdib(path: Path, hz: int) -> ProviderMdib:
    xml = path.read_bytes()
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


def main() -> int:  # noqa: C901, PLR0915
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, required=True, help='HTTP port (0 = OS chooses)')
    ap.add_argument('--host', default='127.0.0.1', help='IP to bind and to put in the XAddr (default 127.0.0.1)')
    ap.add_argument('--bind-host', default=None,
                    help='bind HTTP here instead of --host, still advertising --host (e.g. behind a logging proxy)')
    ap.add_argument('--samples', required=True, help='JSON file {"II": [mV...], "V": [mV...]} at --hz')
    ap.add_argument('--hz', type=int, default=500, choices=(250, 500))
    ap.add_argument('--vt-at', type=float, nargs='+', action='extend', default=[], metavar='SECS',
                    help='raise the VT alert condition SECS after start (repeatable)')
    ap.add_argument('--vt-len', type=float, default=10.0, help='seconds until VT is cleared (default 10)')
    ap.add_argument('--chunk-ms', type=int, default=100, help='waveform report period in ms (default 100)')
    ap.add_argument('--epr', default=None, help='endpoint reference, urn:uuid:... (default: random)')
    ap.add_argument('--max-subscription-duration', type=int, default=15,
                    help='max granted subscription duration in s (sdc11073 default 15)')
    ap.add_argument('--mdib', default=str(DEFAULT_MDIB))
    ap.add_argument('--no-validate', action='store_true', help='disable XML schema validation of messages')
    ap.add_argument('--gzip-only', action='store_true', help='offer only gzip compression (default: all known)')
    ap.add_argument('--commlog', default=None, metavar='DIR', help='write all SOAP messages into DIR')
    ap.add_argument('--exit-after', type=float, default=None, metavar='SECS', help='stop after SECS')
    ap.add_argument('--log-level', default='WARNING')
    args = ap.parse_args()

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

    ii, vv = load_samples(args.samples)
    mdib = load_mdib(Path(args.mdib), args.hz)
    period = 1.0 / args.hz

    if args.epr:
        epr = uuid.UUID(args.epr.removeprefix('urn:uuid:')) if args.epr.startswith('urn:uuid:') else args.epr
    else:
        epr = uuid.uuid4()

    provider = SdcProvider(
        NoDiscovery(args.host),
        ThisModelType(manufacturer='Holmes test peer', manufacturer_url='http://localhost/',
                      model_name='SimECG', model_number='1', model_url='http://localhost/model',
                      presentation_url='http://localhost/presentation'),
        ThisDeviceType(friendly_name='SimECG ward monitor', firmware_version='1.0', serial_number='SIM-0001'),
        mdib,
        epr=epr,
        validate=not args.no_validate,
        ssl_context_container=None,  # plain HTTP
        max_subscription_duration=args.max_subscription_duration,
    )
    if args.gzip_only:
        provider.set_used_compression('gzip')

    from sdc11073.httpserver import compression  # noqa: PLC0415
    encodings = ['gzip'] if args.gzip_only else compression.CompressionHandler.available_encodings[:]
    http_server = FixedPortHttpServer(args.bind_host or args.host, args.port, logging.getLogger('sdc.device.httpsrv'), encodings)
    http_server.start()
    if not http_server.started_evt.wait(30) or http_server.httpd is None or not http_server.is_alive():
        print(f'could not bind HTTP server to {args.bind_host or args.host}:{args.port}', file=sys.stderr)
        return 2
    provider.start_all(start_rtsample_loop=False, shared_http_server=http_server)

    # initial numeric values, so that GetMdib already carries them
    with mdib.metric_state_transaction() as tr:
        for handle, value in ((H_HR, 72), (H_SPO2, 97)):
            st = tr.get_state(handle)
            if st.MetricValue is None:
                st.mk_metric_value()
            st.MetricValue.Value = Decimal(value)
            st.MetricValue.MetricQuality.Validity = pm_types.MeasurementValidity.VALID

    stop = threading.Event()

    def on_signal(signum, _frame):  # noqa: ANN001
        event(ev='signal', signum=signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    xaddr = provider.get_xaddrs()[0]
    t0 = time.time()
    print(json.dumps({'xaddr': xaddr, 'epr': provider.epr_urn}), flush=True)
    event(ev='ready', xaddr=xaddr, port=http_server.server_port, hz=args.hz, samples=len(ii))

    # schedule of VT on/off edges, as (time offset, presence)
    edges = sorted([(s, True) for s in args.vt_at] + [(s + args.vt_len, False) for s in args.vt_at])
    vt_present = False
    sent = 0  # samples sent so far (per lead)
    n = len(ii)
    next_numeric = t0 + 1.0
    chunk = args.chunk_ms / 1000.0
    next_tick = t0 + chunk

    def set_vt(present: bool) -> None:
        with mdib.alert_state_transaction() as tr:
            cond = tr.get_state(H_VT_COND)
            cond.ActivationState = pm_types.AlertActivation.ON
            cond.Presence = present  # DeterminationTime is set by the transaction on change
            sig = tr.get_state(H_VT_SIG)
            sig.ActivationState = pm_types.AlertActivation.ON
            sig.Presence = pm_types.AlertSignalPresence.ON if present else pm_types.AlertSignalPresence.OFF
        event(ev='vt', presence=present)

    try:
        while not stop.is_set():
            now = time.time()
            # VT edges
            while edges and now - t0 >= edges[0][0]:
                _, present = edges.pop(0)
                if present != vt_present:
                    vt_present = present
                    set_vt(present)
            # waveforms: everything whose sample time has passed
            due = int((now - t0) / period) - sent
            if due > 0:
                idx = [(sent + k) % n for k in range(due)]
                with mdib.rt_sample_state_transaction() as tr:
                    for handle, data in ((H_II, ii), (H_V, vv)):
                        st = tr.get_state(handle)
                        if st.MetricValue is None:
                            st.mk_metric_value()
                        st.MetricValue.Samples = [data[i] for i in idx]
                        st.MetricValue.DeterminationTime = t0 + sent * period  # time of first sample
                        st.MetricValue.MetricQuality.Validity = pm_types.MeasurementValidity.VALID
                        st.ActivationState = pm_types.ComponentActivation.ON
                sent += due
            # numerics once per second
            if now >= next_numeric:
                next_numeric += 1.0
                hr = 180 + round(3 * math.sin(now)) if vt_present else 72 + round(2 * math.sin(now / 7))
                spo2 = 97 + round(math.sin(now / 11))
                with mdib.metric_state_transaction() as tr:
                    for handle, value in ((H_HR, hr), (H_SPO2, spo2)):
                        st = tr.get_state(handle)
                        st.MetricValue.Value = Decimal(value)
            if args.exit_after is not None and now - t0 >= args.exit_after:
                break
            next_tick += chunk
            stop.wait(max(0.0, next_tick - time.time()))
    finally:
        event(ev='stopping', samples_sent=sent)
        try:
            provider.stop_all(send_subscription_end=True)
        finally:
            http_server.stop()
            if comm_logger is not None:
                comm_logger.stop()
        event(ev='stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
