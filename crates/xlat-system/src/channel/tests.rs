//! Foreign processes on the channel (issue 35, class 2): connections that are not QEMU's,
//! stay silent, or forge a hello are refused with a reason, and the wait still ends.

use super::*;
use std::io::Write;
use std::sync::atomic::Ordering::Release;

fn quick() -> Limits {
    Limits {
        connect: Duration::from_secs(20),
        hello: Duration::from_millis(300),
        after_exit: Duration::from_millis(300),
        poll: Duration::from_millis(20),
    }
}

fn hello(pid: u32) -> Vec<u8> {
    [wire::HELLO_MAGIC, wire::VERSION, pid, 0, 0, 0]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect()
}

/// Sets `flag` after `after` (QEMU ending).
fn end_after(flag: &Arc<AtomicBool>, after: Duration) {
    let f = flag.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        f.store(true, Release);
    });
}

#[test]
fn the_socket_is_in_a_private_directory() {
    use std::os::unix::fs::PermissionsExt;
    let a = Channel::open().unwrap();
    let b = Channel::open().unwrap();
    assert_ne!(a.path(), b.path(), "predictable");
    let dir = a.path().parent().unwrap().to_path_buf();
    let mode = std::fs::symlink_metadata(&dir)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    drop(a);
    assert!(!dir.exists(), "the directory outlived the capture");
}

#[test]
fn a_silent_connection_is_refused_and_the_real_hello_accepted() {
    let ch = Channel::open().unwrap();
    let me = std::process::id();
    // Connected first and silent: it used to hold the capture forever.
    let _silent = UnixStream::connect(ch.path()).unwrap();
    let mut real = UnixStream::connect(ch.path()).unwrap();
    real.write_all(&hello(me)).unwrap();
    let exited = AtomicBool::new(false);
    let mut refused = Refusals::default();
    let t = Instant::now();
    let mut s = ch.accept(me, &exited, &quick(), &mut refused).unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(refused.count(), 1);
    assert!(
        refused.to_string().contains("sent no hello within 0.3 s"),
        "{refused}"
    );
    // The accepted connection is the one that sent the hello.
    real.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"x");
}

#[test]
fn other_processes_are_refused_and_the_end_of_qemu_ends_the_wait() {
    // "QEMU" is another process; this one connects as a foreign peer, silent or with a
    // hello that names itself truthfully.
    let mut qemu = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let ch = Channel::open().unwrap();
    let me = std::process::id();
    let _silent = UnixStream::connect(ch.path()).unwrap();
    let mut forged = UnixStream::connect(ch.path()).unwrap();
    forged.write_all(&hello(me)).unwrap();
    let exited = Arc::new(AtomicBool::new(false));
    end_after(&exited, Duration::from_millis(500));
    let mut refused = Refusals::default();
    let t = Instant::now();
    let e = ch
        .accept(qemu.id(), &exited, &quick(), &mut refused)
        .unwrap_err();
    let _ = qemu.kill();
    let _ = qemu.wait();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let m = e.to_string();
    assert!(
        m.contains("QEMU ended before the xlat plugin connected"),
        "{m}"
    );
    assert_eq!(refused.count(), 2);
    assert!(
        m.contains(&format!("process {me} is not the QEMU xlat started")),
        "{m}"
    );
}

#[test]
fn forged_hellos_are_refused() {
    let ch = Channel::open().unwrap();
    let me = std::process::id();
    let mut other_pid = UnixStream::connect(ch.path()).unwrap();
    other_pid.write_all(&hello(me + 1)).unwrap();
    let mut bad_magic = UnixStream::connect(ch.path()).unwrap();
    bad_magic.write_all(&[0u8; wire::HELLO_BYTES]).unwrap();
    let closed = UnixStream::connect(ch.path()).unwrap();
    drop(closed);
    let exited = Arc::new(AtomicBool::new(false));
    end_after(&exited, Duration::from_millis(500));
    let mut refused = Refusals::default();
    ch.accept(me, &exited, &quick(), &mut refused).unwrap_err();
    let r = refused.to_string();
    assert_eq!(refused.count(), 3, "{r}");
    assert!(
        r.contains(&format!("hello claims to be process {}", me + 1)),
        "{r}"
    );
    assert!(r.contains("sent no system plugin's hello"), "{r}");
    assert!(r.contains("closed its connection without a hello"), "{r}");
}

#[test]
fn a_flood_of_connections_does_not_hold_the_wait() {
    let ch = Channel::open().unwrap();
    let me = std::process::id();
    let conns: Vec<UnixStream> = (0..40)
        .filter_map(|_| UnixStream::connect(ch.path()).ok())
        .collect();
    assert!(conns.len() > REFUSALS_SHOWN);
    let exited = AtomicBool::new(false);
    let mut refused = Refusals::default();
    let lim = Limits {
        connect: Duration::from_millis(400),
        ..quick()
    };
    let t = Instant::now();
    // Not QEMU's pid: every one is refused at once.
    let e = ch.accept(me + 1, &exited, &lim, &mut refused).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(e.to_string().contains("did not connect within"), "{e}");
    assert_eq!(refused.count(), conns.len() as u64);
    assert!(
        refused
            .to_string()
            .ends_with(&format!("and {} more", conns.len() - REFUSALS_SHOWN)),
        "{refused}"
    );
}

#[test]
fn reads_end_once_qemu_has_ended_and_the_connection_stays_open() {
    let (a, mut b) = UnixStream::pair().unwrap();
    let exited = Arc::new(AtomicBool::new(false));
    let mut g = Guarded::new(a, exited.clone(), quick()).unwrap();
    b.write_all(b"abc").unwrap();
    let mut buf = [0u8; 3];
    g.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"abc");
    // Silent while QEMU runs: the read waits (past several polls) and gets what comes.
    let mut late = b.try_clone().unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        late.write_all(b"d").unwrap();
    });
    let mut one = [0u8; 1];
    g.read_exact(&mut one).unwrap();
    assert_eq!(&one, b"d");
    // QEMU ended, the peer (not QEMU's end) stays open: the read fails soon.
    end_after(&exited, Duration::from_millis(100));
    let t = Instant::now();
    let e = g.read(&mut one).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(e.to_string().contains("stayed open"), "{e}");
    // The end of the stream is an end, not an error.
    let (a, b) = UnixStream::pair().unwrap();
    drop(b);
    let mut g = Guarded::new(a, exited, quick()).unwrap();
    assert_eq!(g.read(&mut one).unwrap(), 0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever a connection of QEMU's pid sends first (any bytes, cut anywhere, with a
    /// true prefix or not), it is heard only if it starts with the plugin's exact hello.
    #[test]
    fn only_the_exact_hello_is_heard(
        keep in 0usize..=wire::HELLO_BYTES,
        tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        flip in proptest::option::of((0usize..wire::HELLO_BYTES, 1u8..=255)),
    ) {
        let me = std::process::id();
        let mut bytes = hello(me);
        bytes.truncate(keep);
        bytes.extend_from_slice(&tail);
        if let Some((at, x)) = flip {
            if at < bytes.len() {
                bytes[at] ^= x;
            }
        }
        let valid = bytes.len() >= wire::HELLO_BYTES && bytes[..wire::HELLO_BYTES] == hello(me)[..];
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(&bytes).unwrap();
        drop(b);
        let r = check(&a, me, Duration::from_secs(5));
        proptest::prop_assert_eq!(r.is_ok(), valid, "{:?} for {:?}", r, bytes);
    }
}
