//! Resolving what runs, the way `execvp` and the kernel would: the program on `PATH`,
//! `#!` scripts through their interpreters by the rules of Linux's `binfmt_script`, and
//! `env` invocations, so that QEMU runs (and the plugin traces) the program that does
//! the work.

use crate::binfmt;
#[cfg(test)]
use crate::binfmt::{shebang, BINPRM_BUF_SIZE};
use crate::launch::{which, which_in};
use crate::CaptureError;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

/// `env` invocations followed in a row (a script run by `env` whose interpreter is `env`…).
const MAX_ENV_HOPS: usize = 8;
/// `execvp`'s search path when `PATH` is unset (glibc's `_CS_PATH`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What QEMU runs: the ELF file it loads, the program's argv (`argv[0]` included) and
/// its environment.
#[derive(Debug)]
pub(crate) struct Launch {
    pub exe: PathBuf,
    pub argv: Vec<OsString>,
    /// The environment `env` would give the program; `None`: this process's, unchanged.
    pub env: Option<Vec<(OsString, OsString)>>,
    /// For the user: an `env` invocation that was left as it is.
    pub warnings: Vec<String>,
}

fn exec_error(program: impl AsRef<OsStr>, reason: impl Into<String>) -> CaptureError {
    CaptureError::Exec {
        program: program.as_ref().to_string_lossy().into_owned(),
        reason: reason.into(),
    }
}

/// Resolves `program args…` the way `execvp` and the kernel would run it, so that QEMU
/// runs (and the plugin traces) the program that does the work: the program is found on
/// `PATH`; a `#!` script runs through its interpreter by the rules of Linux's
/// `binfmt_script` (errors where Linux fails, with the reason); `env [OPTION]…
/// [NAME=VALUE]… COMMAND [ARG]…` runs `COMMAND` itself with the environment `env` would
/// give it (otherwise `env` would be traced and would exec the real program untraced).
/// `env` options this does not model leave `env` as the program, with a warning.
pub(crate) fn resolve(program: &OsStr, args: &[OsString]) -> Result<Launch, CaptureError> {
    let mut argv: Vec<OsString> = std::iter::once(program.to_os_string())
        .chain(args.iter().cloned())
        .collect();
    let mut path = which(program)?;
    let mut env: Option<Vec<(OsString, OsString)>> = None;
    let mut warnings = Vec::new();
    for _ in 0..=MAX_ENV_HOPS {
        let (exe, full) = through_interpreters(path, argv)?;
        let done = |exe, argv, env, warnings| Launch {
            exe,
            argv,
            env,
            warnings,
        };
        if exe.file_name() != Some(OsStr::new("env")) {
            return Ok(done(exe, full, env, warnings));
        }
        let current = env.clone().unwrap_or_else(|| std::env::vars_os().collect());
        match env_command(&full[1..], &current) {
            Ok(Some(run)) => {
                let search = run
                    .vars
                    .iter()
                    .find(|(k, _)| k == "PATH")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| DEFAULT_PATH.into());
                path = which_in(&run.command, &search)?;
                argv = std::iter::once(run.command).chain(run.args).collect();
                env = Some(run.vars);
            }
            Ok(None) => return Ok(done(exe, full, env, warnings)),
            Err(what) => {
                warnings.push(format!(
                    "{} runs through `env` with {what}, which xlat does not model: only env \
                     is traced, and the program it runs is not",
                    program.to_string_lossy()
                ));
                return Ok(done(exe, full, env, warnings));
            }
        }
    }
    Err(exec_error(
        program,
        format!("more than {MAX_ENV_HOPS} `env` invocations in a row"),
    ))
}

/// [`binfmt::through_interpreters`] with the error as a [`CaptureError`].
fn through_interpreters(
    path: PathBuf,
    argv: Vec<OsString>,
) -> Result<(PathBuf, Vec<OsString>), CaptureError> {
    binfmt::through_interpreters(path, argv).map_err(|(p, why)| exec_error(p, why))
}

/// What `env ARGS…` runs: the command, its arguments and environment.
#[derive(Debug, PartialEq)]
struct EnvRun {
    command: OsString,
    args: Vec<OsString>,
    vars: Vec<(OsString, OsString)>,
}

/// Parses GNU `env`'s command line as `env` would in an environment `vars`: `Ok(None)`
/// when it runs no command (it prints the environment, `--help`…), `Err(what)` for
/// what this does not model (`-C`, signal options, `-0` with a command, options that
/// `env` itself rejects such as `-i sh` from a `#!` line, which it then reports).
/// Modeled: `-i`/`-`/`--ignore-environment`, `-u NAME`/`--unset`, `-S STRING`/
/// `--split-string` (quotes, escapes, `${NAME}`, comments), `-v`/`--debug`, `--`,
/// `NAME=VALUE`.
fn env_command(args: &[OsString], vars: &[(OsString, OsString)]) -> Result<Option<EnvRun>, String> {
    use std::os::unix::ffi::OsStringExt;
    let mut rest: std::collections::VecDeque<Vec<u8>> =
        args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let (mut clear, mut unset) = (false, Vec::new());
    const LONG: [&str; 13] = [
        "argv0",
        "block-signal",
        "chdir",
        "debug",
        "default-signal",
        "help",
        "ignore-environment",
        "ignore-signal",
        "list-signal-handling",
        "null",
        "split-string",
        "unset",
        "version",
    ];
    while let Some(a) = rest.pop_front() {
        if a == b"--" {
            break;
        }
        if a == b"-" {
            clear = true;
            break;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            let (name, value) = match long.iter().position(|&c| c == b'=') {
                Some(i) => (&long[..i], Some(long[i + 1..].to_vec())),
                None => (long, None),
            };
            let name = String::from_utf8_lossy(name).into_owned();
            // getopt_long takes unambiguous prefixes.
            let full = LONG
                .iter()
                .copied()
                .find(|l| *l == name)
                .or_else(|| {
                    let m: Vec<&str> = LONG
                        .iter()
                        .copied()
                        .filter(|l| l.starts_with(name.as_str()))
                        .collect();
                    (m.len() == 1).then(|| m[0])
                })
                .ok_or_else(|| format!("the option --{name}"))?;
            let mut value = || {
                value
                    .clone()
                    .or_else(|| rest.pop_front())
                    .ok_or_else(|| format!("--{full} without its value"))
            };
            match full {
                "ignore-environment" => clear = true,
                "debug" => {}
                "unset" => unset.push(value()?),
                "split-string" => {
                    for w in split_string(&value()?, vars)?.into_iter().rev() {
                        rest.push_front(w);
                    }
                }
                "help" | "version" => return Ok(None),
                other => return Err(format!("the option --{other}")),
            }
            continue;
        }
        if a.len() > 1 && a[0] == b'-' {
            let mut j = 1;
            while j < a.len() {
                let c = a[j];
                j += 1;
                match c {
                    b'i' => clear = true,
                    b'v' => {}
                    b'u' | b'S' => {
                        let v = if j < a.len() {
                            a[j..].to_vec()
                        } else {
                            rest.pop_front()
                                .ok_or_else(|| format!("-{} without its value", c as char))?
                        };
                        if c == b'u' {
                            unset.push(v);
                        } else {
                            for w in split_string(&v, vars)?.into_iter().rev() {
                                rest.push_front(w);
                            }
                        }
                        break;
                    }
                    b' ' | b'\t' => {
                        return Err(
                            "options and a command in one #! argument (env needs -S for that)"
                                .into(),
                        )
                    }
                    c => return Err(format!("the option -{}", c as char)),
                }
            }
            continue;
        }
        rest.push_front(a);
        break;
    }
    let mut env: Vec<(OsString, OsString)> = if clear { Vec::new() } else { vars.to_vec() };
    for name in &unset {
        if name.is_empty() || name.contains(&b'=') {
            return Err(format!("-u '{}'", String::from_utf8_lossy(name)));
        }
        env.retain(|(k, _)| k.as_bytes() != name.as_slice());
    }
    while let Some(i) = rest.front().and_then(|a| a.iter().position(|&c| c == b'=')) {
        let a = rest.pop_front().unwrap_or_default();
        if i == 0 {
            return Err(format!("the assignment '{}'", String::from_utf8_lossy(&a)));
        }
        let (k, v) = (
            OsString::from_vec(a[..i].to_vec()),
            OsString::from_vec(a[i + 1..].to_vec()),
        );
        match env.iter_mut().find(|(n, _)| *n == k) {
            Some(slot) => slot.1 = v,
            None => env.push((k, v)),
        }
    }
    let Some(command) = rest.pop_front() else {
        return Ok(None);
    };
    Ok(Some(EnvRun {
        command: OsString::from_vec(command),
        args: rest.into_iter().map(OsString::from_vec).collect(),
        vars: env,
    }))
}

/// Splits `env -S`'s string into arguments as GNU `env` does: whitespace separates;
/// `'…'` is literal but for `\\` and `\'`; in `"…"` and unquoted, backslash escapes
/// (`\" \' \\ \# \$ \_ \f \n \r \t \v`, `\c` ends the string) and `${NAME}` (from
/// `vars`) apply; `#` at the start of an argument starts a comment; unquoted `\_`
/// separates, quoted it is a space.
fn split_string(s: &[u8], vars: &[(OsString, OsString)]) -> Result<Vec<Vec<u8>>, String> {
    #[derive(PartialEq)]
    enum Q {
        No,
        Single,
        Double,
    }
    let mut out = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    let mut q = Q::No;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        i += 1;
        if q == Q::Single {
            match c {
                b'\'' => q = Q::No,
                b'\\' if matches!(s.get(i), Some(b'\\' | b'\'')) => {
                    cur.get_or_insert_with(Vec::new).push(s[i]);
                    i += 1;
                }
                c => cur.get_or_insert_with(Vec::new).push(c),
            }
            continue;
        }
        match c {
            b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' if q == Q::No => out.extend(cur.take()),
            b'#' if q == Q::No && cur.is_none() => break,
            b'\'' if q == Q::No => {
                q = Q::Single;
                cur.get_or_insert_with(Vec::new);
            }
            b'"' => {
                q = if q == Q::Double { Q::No } else { Q::Double };
                cur.get_or_insert_with(Vec::new);
            }
            b'\\' => {
                let e = *s.get(i).ok_or("a backslash at the end of the -S string")?;
                i += 1;
                let ch = match e {
                    b'_' if q == Q::No => {
                        out.extend(cur.take());
                        continue;
                    }
                    b'c' if q == Q::No => break,
                    b'_' => b' ',
                    b'"' | b'\'' | b'\\' | b'#' | b'$' => e,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    e => return Err(format!("the escape \\{} in the -S string", e as char)),
                };
                cur.get_or_insert_with(Vec::new).push(ch);
            }
            b'$' => {
                let close = (s.get(i) == Some(&b'{'))
                    .then(|| s[i..].iter().position(|&c| c == b'}'))
                    .flatten()
                    .ok_or("a '$' not of the form ${NAME} in the -S string")?;
                let name = &s[i + 1..i + close];
                let ok = !name.is_empty()
                    && !name[0].is_ascii_digit()
                    && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
                if !ok {
                    return Err(format!(
                        "the variable ${{{}}} in the -S string",
                        String::from_utf8_lossy(name)
                    ));
                }
                let value = vars
                    .iter()
                    .find(|(k, _)| k.as_bytes() == name)
                    .map(|(_, v)| v.as_bytes().to_vec())
                    .unwrap_or_default();
                // Unquoted, an empty value makes no argument.
                if !value.is_empty() || q == Q::Double {
                    cur.get_or_insert_with(Vec::new).extend(value);
                }
                i += close + 1;
            }
            c => cur.get_or_insert_with(Vec::new).push(c),
        }
    }
    if q != Q::No {
        return Err("an unterminated quote in the -S string".into());
    }
    out.extend(cur);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::command;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    /// A zero-padded 256-byte head from `text`.
    fn buf(text: &[u8]) -> [u8; BINPRM_BUF_SIZE] {
        let mut b = [0u8; BINPRM_BUF_SIZE];
        let n = text.len().min(BINPRM_BUF_SIZE);
        b[..n].copy_from_slice(&text[..n]);
        b
    }

    fn parse(text: &[u8]) -> Result<(String, Option<String>), &'static str> {
        shebang(&buf(text)).map(|(n, a)| {
            (
                String::from_utf8(n).unwrap(),
                a.map(|a| String::from_utf8(a).unwrap()),
            )
        })
    }

    fn some(n: &str, a: Option<&str>) -> Result<(String, Option<String>), &'static str> {
        Ok((n.to_string(), a.map(str::to_string)))
    }

    /// issue 14: `#!` lines as Linux's binfmt_script reads them.
    #[test]
    fn shebang_lines_follow_binfmt_script() {
        assert_eq!(parse(b"#!/bin/sh\necho"), some("/bin/sh", None));
        assert_eq!(parse(b"#! \t/bin/sh -e \t\n"), some("/bin/sh", Some("-e")));
        // The argument is one string, inner spaces included.
        assert_eq!(
            parse(b"#!/usr/bin/env -S a  b\n"),
            some("/usr/bin/env", Some("-S a  b"))
        );
        // No newline: the file ends the line (NUL padding).
        assert_eq!(parse(b"#!/bin/sh -x"), some("/bin/sh", Some("-x")));
        assert_eq!(parse(b"#!/bin/sh"), some("/bin/sh", None));
        // Trailing spaces without a newline: Linux passes an empty argument.
        assert_eq!(parse(b"#!/bin/sh  "), some("/bin/sh", Some("")));
        // A NUL ends the line as well.
        assert_eq!(parse(b"#!/bin/sh\0 -e\n"), some("/bin/sh", None));
        // Longer than 256 bytes: the argument is cut at byte 255.
        let mut long = b"#!/bin/echo ".to_vec();
        long.extend(std::iter::repeat_n(b'a', 300));
        long.push(b'\n');
        assert_eq!(parse(&long), some("/bin/echo", Some(&"a".repeat(243))));
        // ... but an interpreter path that may be cut is refused.
        let mut long = b"#!/bin/".to_vec();
        long.extend(std::iter::repeat_n(b'e', 300));
        assert!(parse(&long).unwrap_err().contains("does not fit"));
        // A name that ends exactly at the buffer's end may be cut: refused.
        let mut exact = b"#!".to_vec();
        exact.extend(std::iter::repeat_n(b'x', 254));
        assert!(parse(&exact).is_err());
        exact[255] = b' ';
        assert_eq!(parse(&exact), some(&"x".repeat(253), None));
        assert!(parse(b"#!\n").unwrap_err().contains("no interpreter"));
        assert!(parse(b"#!   \t  \n")
            .unwrap_err()
            .contains("no interpreter"));
        // Blanks then the NUL padding: an empty name (Linux: ENOENT when it opens it).
        assert_eq!(parse(b"#!  "), some("", None));
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn vars(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    /// issue 14: what `env` would run.
    #[test]
    fn env_command_lines() {
        let base = vars(&[("PATH", "/bin"), ("HOME", "/h"), ("X", "x y")]);
        let run = |a: &[&str]| env_command(&os(a), &base);
        let r = run(&["sh", "-c", "true"]).unwrap().unwrap();
        assert_eq!(
            (r.command, r.args, r.vars),
            ("sh".into(), os(&["-c", "true"]), base.clone())
        );
        let r = run(&["-i", "A=1", "--", "sh"]).unwrap().unwrap();
        assert_eq!(r.vars, vars(&[("A", "1")]));
        let r = run(&["-", "sh"]).unwrap().unwrap();
        assert!(r.vars.is_empty());
        let r = run(&["-u", "HOME", "--unset=X", "PATH=/usr/bin", "sh"])
            .unwrap()
            .unwrap();
        assert_eq!(r.vars, vars(&[("PATH", "/usr/bin")]));
        let r = run(&["-uHOME", "--ignore-e", "sh"]).unwrap().unwrap();
        assert!(r.vars.is_empty());
        // Ambiguous (--ignore-environment, --ignore-signal): env refuses it.
        assert!(run(&["--ign", "sh"]).is_err());
        // -S from a #! line: one argument, split; options inside it are options.
        let r = run(&[
            "-S -i B=2 python3 -u 'a b' \"${X}\"\\_z ${NONE} # c",
            "script",
            "arg",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(r.command, "python3");
        // Unquoted \_ separates; an unquoted empty ${NONE} is no argument.
        assert_eq!(r.args, os(&["-u", "a b", "x y", "z", "script", "arg"]));
        assert_eq!(r.vars, vars(&[("B", "2")]));
        let r = run(&["-S", "sh -e", "s"]).unwrap().unwrap();
        assert_eq!((r.command, r.args), ("sh".into(), os(&["-e", "s"])));
        let r = run(&[
            "-S",
            "a\\_b 'c\\'d' \\t${NONE}. \"${NONE}\" \"c\\_d\" e\\cf g",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.command, r.args),
            ("a".into(), os(&["b", "c'd", "\t.", "", "c d", "e"]))
        );
        // Nothing to run.
        assert_eq!(run(&[]).unwrap(), None);
        assert_eq!(run(&["-i", "A=1"]).unwrap(), None);
        assert_eq!(run(&["--help"]).unwrap(), None);
        // Not modeled, or env's own errors.
        for bad in [
            &["-C", "/", "sh"][..],
            &["-i sh"],
            &["--chdir=/", "sh"],
            &["--block-signal", "sh"],
            &["-S", "'open"],
            &["-S", "$X"],
            &["-S", "\\q"],
            &["-u"],
            &["=x", "sh"],
            &["--nosuch", "sh"],
        ] {
            assert!(run(bad).is_err(), "{bad:?}");
        }
    }

    /// A private temporary directory (`mkdtemp`) with executable files: scripts the tests
    /// run must not sit where another user could write them.
    struct Files(tempfile::TempDir);

    impl Files {
        fn new(tag: &str) -> Files {
            let d = tempfile::Builder::new()
                .prefix(&format!("xlat-launch-{tag}-"))
                .tempdir()
                .unwrap();
            Files(d)
        }
        fn script(&self, name: &str, text: &[u8]) -> PathBuf {
            let p = self.0.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        }
    }

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn scripts_run_through_their_interpreter() {
        let f = Files::new("shebang");
        let s = f.script("s.sh", b"#!/bin/sh -e\necho hi\n");
        let l = resolve(s.as_os_str(), &["x".into()]).unwrap();
        let c = command(
            Path::new("/usr/bin/qemu-x86_64"),
            Path::new("/p.so"),
            "n",
            false,
            &l,
        )
        .unwrap();
        let s = s.to_string_lossy();
        assert_eq!(
            args(&c),
            [
                "-plugin",
                "/p.so,sock=n",
                "-0",
                "/bin/sh",
                "/bin/sh",
                "-e",
                &s,
                "x"
            ]
        );
        assert!(l.warnings.is_empty() && l.env.is_none());
    }

    /// issue 14: nested interpreters, `env` (plain and -S), and the errors Linux gives.
    #[test]
    fn interpreters_env_and_errors() {
        let f = Files::new("nested");
        let inner = f.script("inner", b"#!/bin/sh\n");
        let outer = f.script("outer", format!("#!{} -a", inner.display()).as_bytes());
        let l = resolve(outer.as_os_str(), &["z".into()]).unwrap();
        let (i, o) = (inner.to_string_lossy(), outer.to_string_lossy());
        assert_eq!(l.exe, Path::new("/bin/sh"));
        assert_eq!(l.argv, os(&["/bin/sh", &i, "-a", &o, "z"]));

        let e = f.script("e", b"#!/usr/bin/env sh\n");
        let l = resolve(e.as_os_str(), &[]).unwrap();
        assert_eq!(l.exe, which(OsStr::new("sh")).unwrap());
        assert_eq!(l.argv, os(&["sh", &e.to_string_lossy()]));
        assert!(l.env.is_some() && l.warnings.is_empty());

        let e = f.script("es", b"#!/usr/bin/env -S -i FOO=1 sh -e");
        let l = resolve(e.as_os_str(), &[]).unwrap();
        // -i: no PATH, so execvp's default path.
        assert!(l.exe.starts_with("/bin") || l.exe.starts_with("/usr/bin"));
        assert_eq!(l.argv, os(&["sh", "-e", &e.to_string_lossy()]));
        assert_eq!(l.env, Some(vars(&[("FOO", "1")])));

        let e = f.script("ec", b"#!/usr/bin/env -C / sh\n");
        let l = resolve(e.as_os_str(), &[]).unwrap();
        assert_eq!(l.exe, Path::new("/usr/bin/env"));
        assert!(l.warnings[0].contains("-C"), "{:?}", l.warnings);

        let err = |p: &Path| resolve(p.as_os_str(), &[]).unwrap_err().to_string();
        let mut long = b"#!/".to_vec();
        long.extend(std::iter::repeat_n(b'd', 300));
        assert!(err(&f.script("long", &long)).contains("does not fit in the first 256 bytes"));
        assert!(err(&f.script("none", b"#!/no/such/interp\n")).contains("bad interpreter"));
        // Linux does not search PATH for an interpreter.
        assert!(err(&f.script("rel", b"#!sh\n")).contains("not searched on PATH"));
        assert!(err(&f.script("text", b"echo hi\n")).contains("neither an ELF"));
        let mut prev = f.script("l0", b"#!/bin/sh\n");
        for k in 1..=6 {
            prev = f.script(
                &format!("l{k}"),
                format!("#!{}\n", prev.display()).as_bytes(),
            );
            let r = resolve(prev.as_os_str(), &[]);
            assert_eq!(r.is_ok(), k <= 4, "{k} levels: {r:?}");
        }
    }
}
