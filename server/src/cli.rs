//! The `gatehouse` command line: `serve`, `worker`, `backup`, `restore`, `user`,
//! `grade`, `packet`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use grader::check::check_packet;
use grader::grade::{GradeError, GradeOptions, Grader, Scorecard};
use grader::ingest::IngestLimits;
use grader::packet::Packet;

use crate::text;

#[derive(Parser)]
#[command(
    name = "gatehouse",
    version,
    about = "Take-home interview grading with receipts reviewers can trust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade a submission zip against a packet. Exit 0 when graded (whatever
    /// the verdict), 2 when the submission was refused, 1 when the grader or
    /// its sandbox failed.
    Grade {
        packet: PathBuf,
        submission: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        limits: IngestArgs,
    },
    /// Start the web platform with its grading workers.
    Serve {
        /// Configuration file (default: $GATEHOUSE_CONFIG or ./gatehouse.toml).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run grading workers only (no web server), against the same database
    /// and data directory as `serve`.
    Worker {
        /// Configuration file (default: $GATEHOUSE_CONFIG or ./gatehouse.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// How many workers (default: the configured `workers`).
        #[arg(long)]
        count: Option<usize>,
    },
    /// Back up a running platform (SQLite) into the new or empty folder
    /// DEST: a consistent snapshot of the database, then the blobs and the
    /// packet library, each blob checked; MANIFEST.json last. With Postgres
    /// use pg_dump (docs/operating.md, "Backups").
    Backup {
        dest: PathBuf,
        /// Configuration file (default: $GATEHOUSE_CONFIG or ./gatehouse.toml).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Restore a backup into the configured database file and data folder,
    /// which must be fresh; verifies every graded submission's receipt and
    /// zip. Exit 1 when anything does not check.
    Restore {
        src: PathBuf,
        /// Configuration file (default: $GATEHOUSE_CONFIG or ./gatehouse.toml).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Manage accounts.
    User {
        #[command(subcommand)]
        command: UserCommand,
        #[arg(long, global = true)]
        config: Option<PathBuf>,
    },
    /// Packet authoring tools.
    Packet {
        #[command(subcommand)]
        command: PacketCommand,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create an account. The password is read from $GATEHOUSE_PASSWORD or,
    /// when unset, generated and printed once.
    Add {
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long, value_parser = ["admin", "author", "reviewer"])]
        role: String,
    },
}

#[derive(Subcommand)]
enum PacketCommand {
    /// Write the starter workspace a candidate receives.
    Starter {
        packet: PathBuf,
        /// The assignment's seed, filled into the packet's seed files.
        #[arg(long, default_value = "0")]
        seed: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Mutation audit of a packet's hidden tests: mutants of the sample
    /// (from the configured model, or `--rules`) are classified killed,
    /// survived, crashed or invalid, each run in the grading sandbox.
    Audit(crate::audit::AuditArgs),
    /// Self-test packets: the starter is red, the sample is green and clean,
    /// every known-bad variant triggers exactly its failure ids, every mutant
    /// is killed. Exit 0 only when every packet passes.
    Check {
        #[arg(required = true)]
        packets: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// Ingestion limits; the defaults are safe for take-home submissions.
#[derive(clap::Args)]
struct IngestArgs {
    /// Most entries a submission zip may have.
    #[arg(long, default_value_t = IngestLimits::default().max_entries)]
    max_entries: usize,
    /// Largest expanded size of one entry, in MiB.
    #[arg(long, default_value_t = IngestLimits::default().max_entry_bytes >> 20)]
    max_entry_mb: u64,
    /// Largest expanded size of the whole submission, in MiB.
    #[arg(long, default_value_t = IngestLimits::default().max_total_bytes >> 20)]
    max_total_mb: u64,
    /// Largest compression ratio, per entry and overall.
    #[arg(long, default_value_t = IngestLimits::default().max_ratio)]
    max_ratio: u64,
    /// How deep archives may nest inside the submission.
    #[arg(long, default_value_t = IngestLimits::default().max_nesting)]
    max_nesting: usize,
}

impl IngestArgs {
    fn limits(&self) -> IngestLimits {
        IngestLimits {
            max_entries: self.max_entries,
            max_entry_bytes: self.max_entry_mb << 20,
            max_total_bytes: self.max_total_mb << 20,
            max_ratio: self.max_ratio,
            max_nesting: self.max_nesting,
            ..IngestLimits::default()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// The command tree `gatehouse` parses: the documentation's check
/// (`server/tests/docs`) compares every `gatehouse` command line in the
/// Markdown files with it.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gatehouse: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config } => crate::serve::serve(config.as_deref()),
        Command::Worker { config, count } => crate::serve::worker(config.as_deref(), count),
        Command::Backup { dest, config } => crate::backup::backup(config.as_deref(), &dest),
        Command::Restore { src, config } => crate::backup::restore(config.as_deref(), &src),
        Command::User { command: UserCommand::Add { email, name, role }, config } => {
            crate::serve::add_user(config.as_deref(), &email, name.as_deref(), &role)
        }
        Command::Grade { packet, submission, format, limits } => {
            grade(&packet, &submission, format, limits.limits())
        }
        Command::Packet { command: PacketCommand::Starter { packet, seed, out } } => {
            let packet = Packet::load(&packet)?;
            // The pin file names what this host's sandbox has; without a
            // sandbox it says "unknown" rather than failing the starter.
            let tools: Vec<String> = packet.manifest.environment.tools.keys().cloned().collect();
            let probe = match Grader::for_host()
                .map_err(anyhow::Error::from)
                .and_then(|g| Ok(g.probe(&tools)?))
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!(
                        "gatehouse: warning: the sandbox probe failed ({e:#}); the pin file says \"unknown\""
                    );
                    grader::env::EnvProbe {
                        python: None,
                        tools: Default::default(),
                        stdlib: Default::default(),
                        runner_modules: Default::default(),
                    }
                }
            };
            let gate = grader::starter::Gate::placeholders();
            grader::starter::write_starter_pinned(&packet, &seed, &probe, &gate, &out)
                .map_err(|e| anyhow::anyhow!("writing the starter to {}: {e}", out.display()))?;
            println!(
                "wrote {} ({} starter for seed {seed})",
                out.display(),
                packet.manifest.packet.slug
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Packet { command: PacketCommand::Audit(args) } => crate::audit::run(args),
        Command::Packet { command: PacketCommand::Check { packets, format } } => {
            let grader = Grader::for_host()?;
            let mut all_ok = true;
            let mut reports = Vec::new();
            for dir in &packets {
                let report = check_packet(&grader, dir);
                all_ok &= report.ok();
                if format == Format::Text {
                    print!("{}", text::check_report(&report));
                    std::io::stdout().flush()?;
                }
                reports.push(report);
            }
            if format == Format::Json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            }
            Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

fn grade(
    packet: &std::path::Path,
    submission: &std::path::Path,
    format: Format,
    limits: IngestLimits,
) -> anyhow::Result<ExitCode> {
    let packet = Packet::load(packet)?;
    let mut grader = Grader::for_host()?;
    grader.ingest_limits = limits;
    // The packet's calibration (its sample graded once: the hidden tests'
    // ids and timing, the canaries) first, then the submission;
    // `GATEHOUSE_TIMINGS` prints how long each took (overhead figures).
    let started = std::time::Instant::now();
    let _ = grader.calibration(&packet);
    let calibrated = started.elapsed();
    let started = std::time::Instant::now();
    let graded = grader.grade_zip(&packet, submission, &GradeOptions::default());
    if std::env::var_os("GATEHOUSE_TIMINGS").is_some() {
        eprintln!(
            "gatehouse: calibration {:.3} s, grading {:.3} s",
            calibrated.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
    let card: Scorecard = match graded {
        Ok(card) => card,
        Err(GradeError::Refused(why)) => {
            eprintln!("gatehouse: submission refused: {why}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&card)?),
        Format::Text => print!("{}", text::scorecard(&card)),
    }
    Ok(ExitCode::SUCCESS)
}
