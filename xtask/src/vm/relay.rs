//! Files QEMU writes a guest's stream into (a command's stdout and stderr,
//! the console of a `--shell` run), read as they grow: a reader that
//! waits for more until told the writer is gone, and a relay that copies
//! one such file to the harness's own stdout or stderr.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

/// How often a file that did not grow is read again.
const POLL: Duration = Duration::from_millis(20);

/// Reads a file another process appends to. `read` waits for new bytes and
/// returns end of file only once `done` is set and everything is read.
pub struct TailReader {
    file: File,
    done: Arc<AtomicBool>,
}

impl TailReader {
    pub fn open(path: &Path, done: Arc<AtomicBool>) -> Result<TailReader> {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(TailReader { file, done })
    }
}

impl Read for TailReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            // Checked before reading: bytes written before `done` was set
            // are still read, then end of file.
            let done = self.done.load(Ordering::Acquire);
            let n = self.file.read(buf)?;
            if n > 0 || done {
                return Ok(n);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// A thread copying a growing file to `out` until stopped.
pub struct Relay {
    done: Arc<AtomicBool>,
    thread: JoinHandle<std::io::Result<u64>>,
}

impl Relay {
    pub fn start(path: &Path, mut out: impl Write + Send + 'static) -> Result<Relay> {
        let done = Arc::new(AtomicBool::new(false));
        let mut reader = TailReader::open(path, done.clone())?;
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 64 << 10];
            let mut total = 0;
            // A reader that went away (`run -- cmd | head`) stops the
            // copying, not the run: the rest is read and dropped.
            let mut open = true;
            loop {
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    return Ok(total);
                }
                if open {
                    open = out.write_all(&buf[..n]).and_then(|()| out.flush()).is_ok();
                    if open {
                        total += n as u64;
                    }
                }
            }
        });
        Ok(Relay { done, thread })
    }

    /// Copies what is left once the writer has exited; returns the bytes
    /// relayed in all (up to where the reader went away).
    pub fn finish(self) -> Result<u64> {
        self.done.store(true, Ordering::Release);
        match self.thread.join() {
            Ok(r) => r.context("relaying the guest's output"),
            Err(_) => anyhow::bail!("the output relay thread panicked"),
        }
    }
}

/// Writes whole lines to `out`, each behind `prefix`, so that the output
/// of guests running side by side stays readable; a last line without a
/// newline goes out when it is dropped.
pub struct LinePrefixed<W: Write> {
    prefix: String,
    pending: Vec<u8>,
    out: W,
}

impl<W: Write> LinePrefixed<W> {
    pub fn new(prefix: &str, out: W) -> LinePrefixed<W> {
        LinePrefixed {
            prefix: prefix.to_string(),
            pending: Vec::new(),
            out,
        }
    }

    fn emit(&mut self, line: &[u8]) -> std::io::Result<()> {
        let mut whole = self.prefix.clone().into_bytes();
        whole.extend_from_slice(line);
        // One write per line: lines of two relays do not mix.
        self.out.write_all(&whole)
    }
}

impl<W: Write> Write for LinePrefixed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.emit(&line)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> Drop for LinePrefixed<W> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let mut rest = std::mem::take(&mut self.pending);
            rest.push(b'\n');
            let _ = self.emit(&rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A Write the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn each_line_goes_out_whole_behind_the_prefix() {
        let sink = Shared::default();
        {
            let mut w = LinePrefixed::new("[base] ", sink.clone());
            w.write_all(b"#1 a").unwrap();
            assert!(sink.0.lock().unwrap().is_empty(), "half a line went out");
            w.write_all(b" OK\n#2 b OK\n#3").unwrap();
        }
        assert_eq!(
            String::from_utf8(sink.0.lock().unwrap().clone()).unwrap(),
            "[base] #1 a OK\n[base] #2 b OK\n[base] #3\n"
        );
    }

    #[test]
    fn a_relay_follows_the_file_and_drains_it_at_the_end() {
        let t = crate::util::tempdir();
        let path = t.join("out");
        let mut writer = File::create(&path).unwrap();
        let sink = Shared::default();
        let relay = Relay::start(&path, sink.clone()).unwrap();
        writer.write_all(b"first\n").unwrap();
        let waited = std::time::Instant::now();
        while sink.0.lock().unwrap().len() < 6 {
            assert!(
                waited.elapsed() < Duration::from_secs(5),
                "not relayed live"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        writer.write_all(b"last\n").unwrap();
        assert_eq!(relay.finish().unwrap(), 11);
        assert_eq!(&*sink.0.lock().unwrap(), b"first\nlast\n");
        std::fs::remove_dir_all(t).unwrap();
    }

    /// A writer that refuses everything, like a closed pipe.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reader_that_goes_away_does_not_fail_the_relay() {
        let t = crate::util::tempdir();
        let path = t.join("out");
        std::fs::write(&path, b"lots of output\n").unwrap();
        let relay = Relay::start(&path, Closed).unwrap();
        assert_eq!(relay.finish().unwrap(), 0);
        std::fs::remove_dir_all(t).unwrap();
    }
}
