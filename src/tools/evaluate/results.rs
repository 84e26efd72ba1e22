//! What `holmes evaluate` reports ([`Evaluation`]): per detector ([`DetectorResult`]) the rule
//! it ran and how it was chosen, then per condition (clean, each noise level; [`Condition`])
//! the window metrics, the EC57 summary, time to alarm and sensitivity by kind, and one row per
//! record. What `--json` prints and the report folder keeps.

use std::collections::BTreeMap;

use serde::Serialize;

use super::episodes::{EpisodeFigures, KindSensitivity, RecordComparison, Summary, TimeToAlarm};
use super::{
    BeatReport, BeatTrial, FalseAlarmCauses, LeadSet, MonitorAlarms, PoolingTrial, SplicedReport,
};
use crate::alarm::rules::MemberRef;
use crate::alarm::{AlarmRule, DelayLimits, MatchOptions, ThresholdChoice};

/// Window-level discrimination over the replayed hops.
#[derive(Debug, Clone, Serialize)]
pub struct WindowMetrics {
    /// Hops scored and labelled (not unsure).
    pub windows: usize,
    pub positives: usize,
    /// Hops without a score.
    pub unscored: usize,
    /// `None` when one class is missing.
    pub roc_auc: Option<f64>,
    pub pr_auc: Option<f64>,
    /// The ROC curve `(false positive rate, true positive rate)`, at most a few hundred
    /// points, for the report's figure.
    #[serde(skip)]
    pub roc_curve: Vec<(f64, f64)>,
}

/// One record's line of the per-record table.
#[derive(Debug, Clone, Serialize)]
pub struct RecordRow {
    pub record: String,
    #[serde(flatten)]
    pub comparison: RecordComparison,
    /// What the reference says at each false alarm.
    pub false_alarm_causes: FalseAlarmCauses,
}

/// A detector's results under one condition (clean, or one noise level).
#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    /// `None` for the clean records.
    pub snr_db: Option<f32>,
    pub windows: WindowMetrics,
    pub summary: Summary,
    /// The false alarms of all records by what the reference says at each.
    pub false_alarm_causes: FalseAlarmCauses,
    /// Time to alarm by episode kind (`vt`, `vf`).
    pub by_kind: BTreeMap<&'static str, TimeToAlarm>,
    /// EC57 episode sensitivity by kind, each kind's episodes on their own (EC57 reports VT
    /// and VF apart; Holmes's one alarm is not typed, so its +P has no kind).
    pub ec57_by_kind: BTreeMap<&'static str, KindSensitivity>,
    pub records: Vec<RecordRow>,
}

/// One detector's evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct DetectorResult {
    /// `ensemble`, `classical` or `ensemble+beats`.
    pub detector: &'static str,
    pub rule: AlarmRule,
    /// How the rule was chosen, with what it reached on the validation records; `None` when
    /// the rule was given.
    pub chosen_on_validation: Option<ThresholdChoice>,
    /// The EC57 episode figures the chosen rule reached on the validation records (ensemble
    /// and ensemble+beats only; `None` when the rule was given).
    pub ec57_on_validation: Option<EpisodeFigures>,
    /// Clean first, then the noise levels in the order asked.
    pub conditions: Vec<Condition>,
}

/// The whole evaluation, as `--json` prints it and the report folder keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub part: &'static str,
    /// The leads read of every record (`--leads`).
    pub leads: LeadSet,
    pub records: Vec<String>,
    pub validation_records: Vec<String>,
    /// The ensemble's members with their weights' SHA-256.
    pub members: Vec<MemberRef>,
    /// The primary lead's share the members pooled with (`None`: the plain mean).
    pub primary_share: Option<f64>,
    /// The poolings tried on validation when `--pooling choose` chose one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pooling_trials: Vec<PoolingTrial>,
    pub window_secs: u32,
    pub hop_secs: u32,
    pub matching: MatchOptions,
    pub target_sensitivity: f64,
    /// The time to alarm the rules had to keep on validation, if bounded.
    pub delay_limits: Option<DelayLimits>,
    pub detectors: Vec<DetectorResult>,
    /// The beat classifier and its beat rule, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beats: Option<BeatReport>,
    /// The beat rules tried on validation, each with its alarm rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beat_trials: Vec<BeatTrial>,
    /// The classical detector's alarms on the clean records, each judged true or false, with
    /// the served risk and alarm before each (`monitor_alarms`); absent without the classical
    /// detector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_alarms: Option<MonitorAlarms>,
    /// Spliced short runs and hard negatives in the reported part's records, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spliced: Option<SplicedReport>,
    /// The monitor's alarms and the spliced events' pooled (plain events, then with the shaped
    /// runs), each opinion at the served point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy_pooled: Vec<super::spliced_alarms::ProxyPooled>,
    /// A textbook monitor's alarms (N = 4, 5, 6 wide beats) clean and under each noise level,
    /// with Holmes's opinion on each ([`textbook`](super::textbook)); absent without the
    /// classical detector.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub textbook_monitor: Vec<super::textbook::TextbookMonitor>,
    /// The figure of a spliced run beside a real one (the report folder's `spliced.svg`).
    #[serde(skip)]
    pub spliced_svg: Option<String>,
}
