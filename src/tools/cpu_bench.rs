//! `holmes bench-cpu`: the ONNX Runtime yardstick for the zoo's convolutions.
//!
//! Loads the reference 1-D ResNeXt weights that `../shared/bench/ort-peer/gen_onnx.py W D`
//! writes (`weights_W_D.bin` plus its text manifest; never committed here) into the zoo's own
//! [`ResNeXt1d`] (plain path: burn's `Conv1d`/`BatchNorm`/`max_pool1d`) and its inference form
//! [`FastResNeXt1d`] (fast path), checks both against ORT's output on the verification input
//! (`verify_W_D_in.bin` / `verify_W_D_ort.bin`, max abs diff < 1e-3), and times forward passes.
//!
//! Two modes: [`table`] prints burn-only timings of both paths; [`serve`] speaks a line
//! protocol on stdin/stdout so `scripts/bench_cpu.py` can interleave burn with onnxruntime in
//! one run and report the burn/ORT ratio (the protocol of the yardstick's `bench_driver.py`,
//! plus a path argument and an `eval` command for live output checks).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use crate::core::stats::{max_abs_diff, median};
use crate::zoo::{
    FastResNeXt1d, FoldedBlock, FoldedWeights, InferencePath, ResNeXt1d, ResNeXtArch, on_host,
    same_padding,
};

/// `holmes bench-cpu` arguments.
#[derive(Debug, Clone)]
pub(crate) struct BenchCpuArgs {
    /// Folder holding gen_onnx.py's output (weights_W_D.{bin,txt}, verify_W_D_{in,ort}.bin).
    pub(crate) weights: PathBuf,
    /// Answer the line protocol on stdin instead of printing a table.
    pub(crate) serve: bool,
    /// Configurations `WxD`, comma-separated.
    pub(crate) configs: String,
    /// Batch sizes, comma-separated.
    pub(crate) batches: String,
    /// Timed forward passes per path and point.
    pub(crate) iters: usize,
    /// Run on the CUDA device (builds with `--features cuda` only).
    pub(crate) cuda: bool,
}

/// Runs `holmes bench-cpu` on the flex CPU backend (or CUDA with `--cuda`).
pub(crate) fn run(args: &BenchCpuArgs) -> Result<(), BenchCpuError> {
    let bad = |reason: String| BenchCpuError::Format {
        path: PathBuf::from("<command line>"),
        reason,
    };
    let configs = args
        .configs
        .split(',')
        .map(|c| {
            let (w, d) = c
                .split_once('x')
                .ok_or_else(|| bad(format!("config {c} is not WxD")))?;
            match (w.trim().parse(), d.trim().parse()) {
                (Ok(w), Ok(d)) => Ok((w, d)),
                _ => Err(bad(format!("config {c} is not WxD"))),
            }
        })
        .collect::<Result<Vec<(usize, usize)>, _>>()?;
    let batches = args
        .batches
        .split(',')
        .map(|b| {
            b.trim()
                .parse()
                .map_err(|_| bad(format!("batch {b} is not a number")))
        })
        .collect::<Result<Vec<usize>, _>>()?;
    if args.cuda {
        #[cfg(feature = "cuda")]
        {
            let device = Default::default();
            return go::<burn::backend::Cuda>(args, &configs, &batches, &device);
        }
        #[cfg(not(feature = "cuda"))]
        return Err(bad(
            "this build has no CUDA support (--features cuda)".into()
        ));
    }
    go::<burn::backend::Flex>(args, &configs, &batches, &Default::default())
}

fn go<B: Backend>(
    args: &BenchCpuArgs,
    configs: &[(usize, usize)],
    batches: &[usize],
    device: &B::Device,
) -> Result<(), BenchCpuError> {
    if args.serve {
        serve::<B>(&args.weights, device)
    } else {
        print!(
            "{}",
            table::<B>(&args.weights, configs, batches, args.iters, device)?
        );
        Ok(())
    }
}

/// Samples per reference window.
pub(crate) const L_IN: usize = 7500;
/// Reference kernel length.
pub(crate) const K: usize = 16;
/// Largest |burn - ORT| accepted on the verification input.
pub(crate) const ORT_TOLERANCE: f32 = 1e-3;

/// What can go wrong reading or checking the reference weights.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchCpuError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("W={w} D={d}: the {path} path differs from ORT by {diff} (> {ORT_TOLERANCE})")]
    Mismatch {
        w: usize,
        d: usize,
        path: &'static str,
        diff: f32,
    },
}

/// One reference configuration in both forms.
pub(crate) struct Reference<B: Backend> {
    pub(crate) width: usize,
    pub(crate) depth: usize,
    /// Multiply-accumulates per window (convolutions and the linear layer, as `arch.py`).
    pub(crate) macs: u64,
    pub(crate) plain: ResNeXt1d<B>,
    pub(crate) fast: FastResNeXt1d<B>,
    device: B::Device,
}

/// The zoo architecture equal to `arch.py`'s rules for `(W, D)` (32 groups from W = 32 on).
pub(crate) fn reference_arch(width: usize, depth: usize) -> ResNeXtArch {
    let groups = if width >= 32 { 32 } else { 1 };
    ResNeXtArch {
        width,
        depth,
        group_width: width / groups,
        kernel: K,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, BenchCpuError> {
    std::fs::read(path).map_err(|source| BenchCpuError::Io {
        path: path.to_owned(),
        source,
    })
}

fn floats(path: &Path) -> Result<Vec<f32>, BenchCpuError> {
    let bytes = read(path)?;
    if !bytes.len().is_multiple_of(4) {
        return Err(BenchCpuError::Format {
            path: path.to_owned(),
            reason: "length is not a multiple of 4 bytes".into(),
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

impl<B: Backend> Reference<B> {
    /// Reads `weights_W_D.{txt,bin}` from `dir` and checks every shape, stride, group count and
    /// padding against the zoo's plan for [`reference_arch`].
    pub(crate) fn load(
        dir: &Path,
        width: usize,
        depth: usize,
        device: &B::Device,
    ) -> Result<Self, BenchCpuError> {
        let txt = dir.join(format!("weights_{width}_{depth}.txt"));
        let bad = |reason: String| BenchCpuError::Format {
            path: txt.clone(),
            reason,
        };
        let manifest = String::from_utf8_lossy(&read(&txt)?).into_owned();
        let data = floats(&dir.join(format!("weights_{width}_{depth}.bin")))?;
        let mut tensors: HashMap<String, (usize, Vec<usize>)> = HashMap::new();
        let mut convs: HashMap<String, Vec<usize>> = HashMap::new();
        for line in manifest.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.first() {
                Some(&"tensor") if f.len() == 4 => {
                    let off = f[2]
                        .parse()
                        .map_err(|_| bad(format!("bad offset: {line}")))?;
                    let dims = f[3]
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<Vec<usize>, _>>()
                        .map_err(|_| bad(format!("bad shape: {line}")))?;
                    tensors.insert(f[1].to_owned(), (off, dims));
                }
                Some(&"conv") if f.len() == 9 => {
                    let v = f[2..]
                        .iter()
                        .map(|x| x.parse())
                        .collect::<Result<Vec<usize>, _>>()
                        .map_err(|_| bad(format!("bad conv line: {line}")))?;
                    convs.insert(f[1].to_owned(), v);
                }
                _ => {}
            }
        }
        let tensor = |name: &str, want: &[usize]| -> Result<Vec<f32>, BenchCpuError> {
            let (off, dims) = tensors
                .get(name)
                .ok_or_else(|| bad(format!("no tensor {name}")))?;
            if dims != want {
                return Err(bad(format!("{name} is {dims:?}, the plan says {want:?}")));
            }
            let n: usize = dims.iter().product();
            data.get(*off..off + n)
                .map(<[f32]>::to_vec)
                .ok_or_else(|| bad(format!("{name} runs past the end of the weights")))
        };
        let arch = reference_arch(width, depth);
        let (stem, blocks) = arch.plan(L_IN);
        let mut len = L_IN;
        let mut conv =
            |name: &str, c: &crate::zoo::ConvShape| -> Result<FoldedWeights, BenchCpuError> {
                let (_, pb, pe) = same_padding(len, K, c.stride);
                let want = vec![c.cin, c.cout, K, c.stride, c.groups, pb, pe];
                let got = convs
                    .get(name)
                    .ok_or_else(|| bad(format!("no conv {name}")))?;
                if *got != want {
                    return Err(bad(format!(
                        "conv {name} is {got:?}, the plan says {want:?}"
                    )));
                }
                len = c.l_out;
                Ok(FoldedWeights {
                    weight: tensor(&format!("{name}.w"), &[c.cout, c.cin / c.groups, K])?,
                    bias: tensor(&format!("{name}.b"), &[c.cout])?,
                    cin: c.cin,
                    cout: c.cout,
                    kernel: K,
                    stride: c.stride,
                    groups: c.groups,
                })
            };
        let stem = conv("stem", &stem)?;
        let mut folded = Vec::with_capacity(blocks.len());
        for (i, (c1, c2)) in blocks.iter().enumerate() {
            folded.push(FoldedBlock {
                c1: conv(&format!("b{i}.c1"), c1)?,
                c2: conv(&format!("b{i}.c2"), c2)?,
            });
        }
        let c = arch.final_channels();
        let fc_w = tensor("fc.w", &[c, 2])?;
        let fc_b = tensor("fc.b", &[2])?;
        let plain = arch
            .init::<B>(device)
            .load_folded(&stem, &folded, &fc_w, &fc_b);
        let fast = plain.inference_form();
        Ok(Reference {
            width,
            depth,
            macs: arch.macs(L_IN),
            plain,
            fast,
            device: device.clone(),
        })
    }

    /// `[batch, 2]` logits (flattened) of `x` (`[batch, 1, 7500]` flattened) through `path`.
    pub(crate) fn logits(&self, x: &[f32], path: InferencePath) -> Vec<f32> {
        let t = self.input(x);
        let y = match path {
            InferencePath::Fast => self.fast.forward(t),
            InferencePath::Plain => self.plain.forward(t),
        };
        y.into_data().to_vec::<f32>().expect("logits are f32")
    }

    fn input(&self, x: &[f32]) -> Tensor<B, 3> {
        let n = x.len() / L_IN;
        Tensor::from_data(TensorData::new(x.to_vec(), [n, 1, L_IN]), &self.device)
    }

    /// Max |burn - ORT| of each path on the verification input, or an error over tolerance;
    /// NaN for the fast path off the host, where it does not run.
    pub(crate) fn verify(&self, dir: &Path) -> Result<(f32, f32), BenchCpuError> {
        let tag = format!("{}_{}", self.width, self.depth);
        let x = floats(&dir.join(format!("verify_{tag}_in.bin")))?;
        let want = floats(&dir.join(format!("verify_{tag}_ort.bin")))?;
        let mut diffs = [f32::NAN; 2];
        for (d, path) in diffs
            .iter_mut()
            .zip([InferencePath::Fast, InferencePath::Plain])
            .filter(|(_, p)| runs_on::<B>(*p))
        {
            let got = self.logits(&x, path);
            *d = max_abs_diff(&got, &want);
            if d.is_nan() || *d >= ORT_TOLERANCE {
                return Err(BenchCpuError::Mismatch {
                    w: self.width,
                    d: self.depth,
                    path: path.name(),
                    diff: *d,
                });
            }
        }
        Ok((diffs[0], diffs[1]))
    }

    /// Milliseconds of each of `n` forward passes of `batch` windows (input upload and
    /// logits download included, as a caller sees them).
    pub(crate) fn time_runs(&self, path: InferencePath, batch: usize, n: usize) -> Vec<f64> {
        let x = synth_input(batch);
        (0..n)
            .map(|_| {
                let t0 = Instant::now();
                let y = self.logits(&x, path);
                std::hint::black_box(y);
                t0.elapsed().as_secs_f64() * 1e3
            })
            .collect()
    }
}

/// A timing input like the yardstick's: a 1.2 Hz sine plus uniform noise, `[batch, 1, 7500]`.
pub(crate) fn synth_input(batch: usize) -> Vec<f32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..batch * L_IN)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let t = (i % L_IN) as f32 / 250.0;
            0.8 * (2.0 * std::f32::consts::PI * 1.2 * t).sin() + u
        })
        .collect()
}

/// Burn-only timings of both paths for each configuration and batch (the plain path only off
/// the host, the fast columns then "n/a"): a markdown table with the verification result,
/// medians, GMAC/s and the fast path's speed-up.
pub(crate) fn table<B: Backend>(
    dir: &Path,
    configs: &[(usize, usize)],
    batches: &[usize],
    iters: usize,
    device: &B::Device,
) -> Result<String, BenchCpuError> {
    let mut out = String::from(
        "| W | D | batch | MMAC | plain ms | fast ms | plain GMAC/s | fast GMAC/s | speed-up | max abs diff to ORT (fast / plain) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for &(w, d) in configs {
        let r = Reference::<B>::load(dir, w, d, device)?;
        let (df, dp) = r.verify(dir)?;
        for &b in batches {
            let mut samples = [Vec::new(), Vec::new()];
            let paths: Vec<InferencePath> = [InferencePath::Plain, InferencePath::Fast]
                .into_iter()
                .filter(|&p| runs_on::<B>(p))
                .collect();
            for &p in &paths {
                r.time_runs(p, b, 2); // warm-up
            }
            // Interleave the two paths so drifting load hits both alike.
            for _ in 0..iters.div_ceil(2) {
                for (s, &p) in samples.iter_mut().zip(&paths) {
                    s.extend(r.time_runs(p, b, 2));
                }
            }
            let mac = r.macs as f64 * b as f64;
            let tp = median(&samples[0]);
            // "n/a" for the fast path where it does not run.
            let fast = |f: &dyn Fn(f64) -> String| {
                if samples[1].is_empty() {
                    "n/a".to_owned()
                } else {
                    f(median(&samples[1]))
                }
            };
            out += &format!(
                "| {w} | {d} | {b} | {:.1} | {tp:.2} | {} | {:.2} | {} | {} | {} / {dp:.1e} |\n",
                mac / 1e6,
                fast(&|tf| format!("{tf:.2}")),
                mac / tp / 1e6,
                fast(&|tf| format!("{:.2}", mac / tf / 1e6)),
                fast(&|tf| format!("{:.2}x", tp / tf)),
                fast(&|_| format!("{df:.1e}")),
            );
        }
    }
    Ok(out)
}

/// Whether `path` runs on backend `B`: both on the host, the plain path alone on a GPU
/// ([`InferencePath::for_backend`]).
fn runs_on<B: Backend>(path: InferencePath) -> bool {
    on_host::<B>() || path == InferencePath::Plain
}

/// The line protocol `scripts/bench_cpu.py` drives, one reply line per command:
/// - `load W D` -> `ok <macs> <fast diff> <plain diff>` (verified against ORT's output; the
///   fast diff is NaN off the host, where only the plain path runs)
/// - `run fast|plain B N` -> `times <ms> ...` (N timed forward passes of batch B; `fast` is
///   refused off the host)
/// - `eval fast|plain FILE B` -> `logits <v> ...` for the `[B, 1, 7500]` f32 input in FILE
/// - `quit`
///
/// Errors answer `err <message>` and the loop goes on.
pub(crate) fn serve<B: Backend>(dir: &Path, device: &B::Device) -> Result<(), BenchCpuError> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut current: Option<Reference<B>> = None;
    for line in stdin.lock().lines() {
        let line = line.map_err(|source| BenchCpuError::Io {
            path: PathBuf::from("<stdin>"),
            source,
        })?;
        let f: Vec<&str> = line.split_whitespace().collect();
        let path_of = |s: &str| match s {
            "fast" if !runs_on::<B>(InferencePath::Fast) => {
                Err("the fast path runs on the host only".to_owned())
            }
            "fast" => Ok(InferencePath::Fast),
            "plain" => Ok(InferencePath::Plain),
            other => Err(format!("unknown path {other}")),
        };
        let reply: Result<String, String> = match f.as_slice() {
            ["quit"] => break,
            ["load", w, d] => match (w.parse(), d.parse()) {
                (Ok(w), Ok(d)) => Reference::load(dir, w, d, device)
                    .and_then(|r| {
                        let (df, dp) = r.verify(dir)?;
                        let msg = format!("ok {} {df:e} {dp:e}", r.macs);
                        current = Some(r);
                        Ok(msg)
                    })
                    .map_err(|e| e.to_string()),
                _ => Err("load W D".into()),
            },
            ["run", p, b, n] => match (&current, path_of(p), b.parse(), n.parse()) {
                (Some(r), Ok(p), Ok(b), Ok(n)) => Ok(r
                    .time_runs(p, b, n)
                    .iter()
                    .fold(String::from("times"), |s, t| s + &format!(" {t:.4}"))),
                (None, ..) => Err("no model loaded".into()),
                _ => Err("run fast|plain B N".into()),
            },
            ["eval", p, file, b] => match (&current, path_of(p), b.parse::<usize>()) {
                (Some(r), Ok(p), Ok(b)) => floats(Path::new(file))
                    .map_err(|e| e.to_string())
                    .and_then(|x| {
                        if x.len() == b * L_IN {
                            Ok(r.logits(&x, p)
                                .iter()
                                .fold(String::from("logits"), |s, v| s + &format!(" {v:e}")))
                        } else {
                            Err(format!("{file} holds {} floats, not {b} windows", x.len()))
                        }
                    }),
                (None, ..) => Err("no model loaded".into()),
                _ => Err("eval fast|plain FILE B".into()),
            },
            _ => Err(format!("unknown command: {line}")),
        };
        let text = match reply {
            Ok(s) => s,
            Err(e) => format!("err {e}"),
        };
        writeln!(stdout, "{text}")
            .and_then(|_| stdout.flush())
            .map_err(|source| BenchCpuError::Io {
                path: PathBuf::from("<stdout>"),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_arch_follows_arch_py() {
        // arch.py: groups = 32 if W >= 32 else 1; macs() as gen_onnx.py prints them.
        assert_eq!(reference_arch(8, 2).groups(), 1);
        assert_eq!(reference_arch(64, 8).groups(), 32);
        assert_eq!(reference_arch(8, 2).macs(L_IN), 10_083_104);
        assert_eq!(reference_arch(32, 4).macs(L_IN), 16_335_104);
        assert_eq!(reference_arch(64, 8).macs(L_IN), 37_591_552);
        assert_eq!(reference_arch(128, 16).macs(L_IN), 293_106_688);
    }

    #[test]
    fn synthetic_input_is_bounded_noise_on_a_sine() {
        let x = synth_input(2);
        assert_eq!(x.len(), 2 * L_IN);
        assert!(x.iter().all(|v| v.abs() <= 1.3));
        assert!(x[..L_IN] != x[L_IN..], "windows differ");
    }
}
