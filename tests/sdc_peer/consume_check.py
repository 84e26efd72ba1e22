#!/usr/bin/env python3
"""Check tests/sdc_peer/provider.py with sdc11073's own consumer (no discovery, direct XAddr).

    python3 tests/sdc_peer/consume_check.py --xaddr http://127.0.0.1:50123/<epr-hex> \
        [--seconds 5] [--wait-vt 20] [--renew-interval 3] [--mode split|all] [--commlog DIR]

Sequence (what a Holmes consumer does too):
  1. WS-Transfer Get on the XAddr (SdcConsumer.start_all reads metadata + each hosted service's WSDL);
     start_all is told not to subscribe anything itself;
  2. Subscribe: --mode split (default) = two subscriptions on the hosted service that offers
     WaveformService: one for WaveformStream, one for EpisodicAlertReport + EpisodicMetricReport;
     --mode all = one subscription with every action the provider offers (sdc11073 default behaviour);
  3. GetMdib (after subscribing, as SDPi recommends), prints the handles/codes found;
  4. counts waveform samples per lead for --seconds, checks DeterminationTime continuity,
     then waits up to --wait-vt more seconds for AlertConditionState ac.vt Presence=true.
Prints a JSON summary on stdout; exit status 0 if samples arrived for both leads (and, with
--expect-vt, the VT presence was seen), else 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
import warnings
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlparse

from sdc11073 import observableproperties as properties
from sdc11073.consumer.consumerimpl import SdcConsumer
from sdc11073.definitions_sdc import SdcV1Definitions
from sdc11073.xml_types.actions import Actions
from sdc11073.xml_types.dpws_types import DeviceEventingFilterDialectURI
from sdc11073.xml_types.eventing_types import FilterType


def main() -> int:  # noqa: C901, PLR0912, PLR0915
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--xaddr', required=True)
    ap.add_argument('--seconds', type=float, default=5.0, help='waveform counting window (default 5)')
    ap.add_argument('--wait-vt', type=float, default=0.0, help='extra seconds to wait for VT presence')
    ap.add_argument('--expect-vt', action='store_true', help='fail if VT presence was not seen')
    ap.add_argument('--renew-interval', type=int, default=None,
                    help='renew every N s (default: sdc11073 renews at 50%% of the granted time)')
    ap.add_argument('--mode', choices=('split', 'all'), default='split')
    ap.add_argument('--commlog', default=None, metavar='DIR', help='write all SOAP messages into DIR')
    ap.add_argument('--notify-port', type=int, default=None,
                    help='bind the notification (event sink) HTTP server to this port (default: OS chooses)')
    ap.add_argument('--notify-host', default=None,
                    help='host put into NotifyTo/EndTo instead of the local IP (e.g. a logging proxy)')
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

    consumer = SdcConsumer(args.xaddr, sdc_definitions=SdcV1Definitions, ssl_context_container=None,
                           validate=True, alternative_hostname=args.notify_host)
    sink_server = None
    if args.notify_port is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from provider import FixedPortHttpServer  # noqa: PLC0415
        from sdc11073.httpserver.compression import CompressionHandler  # noqa: PLC0415

        bind_ip = urlparse(args.xaddr).hostname  # same interface the consumer uses to reach the provider
        sink_server = FixedPortHttpServer(bind_ip, args.notify_port, logging.getLogger('sdc.client.sink'),
                                          CompressionHandler.available_encodings[:])
        sink_server.start()
        sink_server.started_evt.wait(10)
    model = consumer.sdc_definitions.data_model
    lock = threading.Lock()
    samples = defaultdict(int)  # handle -> count (inside the window)
    reports = defaultdict(int)  # action short name -> count
    continuity = defaultdict(lambda: {'gaps': 0, 'max_gap_ms': 0.0})
    last_end = {}  # handle -> expected DeterminationTime of next chunk
    periods = {}  # handle -> SamplePeriod in s (from GetMdib)
    counting = threading.Event()
    vt = {'seen_true': False, 'seen_false_after': False, 'first_true_at': None}
    hr_values = []

    def on_waveform(msg) -> None:  # noqa: ANN001
        report = model.msg_types.WaveformStream.from_node(msg.p_msg.msg_node)
        with lock:
            reports['WaveformStream'] += 1
            for st in report.State:
                mv = st.MetricValue
                if mv is None or mv.Samples is None:
                    continue
                h = st.DescriptorHandle
                if counting.is_set():
                    samples[h] += len(mv.Samples)
                per = periods.get(h)
                if per and h in last_end:
                    gap = abs(mv.DeterminationTime - last_end[h]) * 1000
                    if gap > per * 1000 / 2:
                        continuity[h]['gaps'] += 1
                        continuity[h]['max_gap_ms'] = max(continuity[h]['max_gap_ms'], round(gap, 3))
                if per:
                    last_end[h] = mv.DeterminationTime + len(mv.Samples) * per

    def on_alert(msg) -> None:  # noqa: ANN001
        report = model.msg_types.EpisodicAlertReport.from_node(msg.p_msg.msg_node)
        with lock:
            reports['EpisodicAlertReport'] += 1
            for part in report.ReportPart:
                for st in part.AlertState:
                    if st.DescriptorHandle == 'ac.vt':
                        if st.Presence:
                            if not vt['seen_true']:
                                vt['first_true_at'] = round(time.time(), 3)
                            vt['seen_true'] = True
                        elif vt['seen_true']:
                            vt['seen_false_after'] = True

    def on_metric(msg) -> None:  # noqa: ANN001
        report = model.msg_types.EpisodicMetricReport.from_node(msg.p_msg.msg_node)
        with lock:
            reports['EpisodicMetricReport'] += 1
            for part in report.ReportPart:
                for st in part.MetricState:
                    if st.DescriptorHandle == 'hr' and st.MetricValue is not None:
                        hr_values.append(float(st.MetricValue.Value))

    properties.bind(consumer, waveform_report=on_waveform)
    properties.bind(consumer, episodic_alert_report=on_alert)
    properties.bind(consumer, episodic_metric_report=on_metric)

    all_actions = [a.value for a in Actions]
    consumer.start_all(not_subscribed_actions=all_actions, fixed_renew_interval=args.renew_interval,
                       shared_http_server=sink_server)

    # find the hosted service that offers WaveformService / StateEventService
    hosted_by_type = {}
    for hosted in consumer.host_description.relationship.Hosted:
        for q in hosted.Types or []:
            hosted_by_type[q.localname] = hosted
    wf_client = consumer.waveform_service_client
    se_client = consumer.state_event_service_client
    keys = {k.action: k for c in (wf_client, se_client) for k in c.get_available_subscriptions()}

    def subscribe(hosted, actions: list[str]):  # noqa: ANN001, ANN202
        flt = FilterType()
        flt.Dialect = DeviceEventingFilterDialectURI.ACTION
        flt.text = ' '.join(actions)
        return consumer.do_subscribe(hosted, flt, [keys[a] for a in actions], expire_seconds=60)

    subs = []
    if args.mode == 'split':
        subs.append(subscribe(hosted_by_type['WaveformService'], [Actions.Waveform.value]))
        subs.append(subscribe(hosted_by_type['StateEventService'],
                              [Actions.EpisodicAlertReport.value, Actions.EpisodicMetricReport.value]))
    else:
        offered = [a for c in (wf_client, se_client) for a in (k.action for k in c.get_available_subscriptions())]
        subs.append(subscribe(hosted_by_type['WaveformService'], offered))

    got = consumer.get_service_client.get_mdib()
    descriptors, states = got.result
    codes = {}
    for d in descriptors:
        if d.Type is not None:
            codes[d.Handle] = d.Type.Code
        if getattr(d, 'SamplePeriod', None):
            periods[d.Handle] = float(d.SamplePeriod)
    mvg = got.mdib_version_group
    vt_state_at_getmdib = next((s.Presence for s in states if s.DescriptorHandle == 'ac.vt'), None)

    t_start = time.time()
    counting.set()
    time.sleep(args.seconds)
    counting.clear()
    window = time.time() - t_start
    deadline = time.time() + args.wait_vt
    while time.time() < deadline and not vt['seen_true']:
        time.sleep(0.2)

    with lock:
        summary = {
            'xaddr': args.xaddr,
            'mode': args.mode,
            'mdib': {'MdibVersion': mvg.mdib_version, 'SequenceId': mvg.sequence_id,
                     'InstanceId': mvg.instance_id, 'descriptors': len(descriptors), 'codes': codes,
                     'sample_periods_s': periods, 'vt_presence_at_getmdib': vt_state_at_getmdib},
            'subscriptions': [{'filter': s.short_filter_string, 'granted_s': s.granted_expires,
                               'manager': s.subscribe_response.SubscriptionManager.Address,
                               'notify_to': s.notification_url} for s in subs],
            'window_s': round(window, 2),
            'samples_per_lead': dict(samples),
            'samples_per_s': {h: round(n / window, 1) for h, n in samples.items()},
            'continuity': {h: dict(v) for h, v in continuity.items()},
            'reports': dict(reports),
            'hr_values_seen': sorted(set(hr_values)),
            'vt_presence_seen': vt['seen_true'],
            'vt_first_true_at': vt['first_true_at'],
            'vt_cleared_seen': vt['seen_false_after'],
        }
    consumer.stop_all(unsubscribe=True)
    if sink_server is not None:
        sink_server.stop()
    if comm_logger is not None:
        comm_logger.stop()
    print(json.dumps(summary, indent=2), flush=True)
    ok = samples.get('ecg.ii', 0) > 0 and samples.get('ecg.v', 0) > 0
    if args.expect_vt:
        ok = ok and vt['seen_true']
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
