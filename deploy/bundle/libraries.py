#!/usr/bin/env python3
"""Gathers the shared libraries a worker bundle carries (run by deploy/bundle.sh).

  libraries.py LIB_DIR DOC_DIR PROGRAM...

Copies into LIB_DIR every library the PROGRAMs load, as this machine's loader resolves them, plus
the rest of the C library (libdl, libpthread, librt, the NSS modules: what the NVIDIA driver's
libraries and the C library itself may load at run time must match the bundled libc). Writes
DOC_DIR/libraries.txt (each library, its Debian package and version; what was left out and
why) and DOC_DIR/copyright/PACKAGE for every package a library came from.

Left out: the libraries Debian's OpenImageIO links for formats a worker never reads (LEFT_OUT)
and everything only they load, nine tenths of the total. The dynamic loader still insists on
every library a kept one names, and on each symbol and symbol version it imports (OpenImageIO is
linked with BIND_NOW), so each left-out library a kept one names is replaced by a placeholder
with its soname that defines exactly what the kept objects import from it; a symbol that a kept
object defines itself is never shadowed. A placeholder function is never meant to run (the worker
refuses those formats before OpenImageIO sees them: shared/images/image_io.cpp); if one does, it prints
which function of which library was called and ends the process with status 70.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

LEFT_OUT = [
    (r'libopencv_\w+\.so\.\d+', 'OpenCV: OpenImageIO\'s cv::Mat conversions and camera capture'),
    (r'lib(avcodec|avformat|avutil|swscale|swresample)\.so\.\d+',
     'FFmpeg: OpenImageIO\'s movie reader (encode steps run the host\'s ffmpeg)'),
    (r'libopenvdb\.so\.[\d.]+', 'OpenVDB: volumes read as images'),
    (r'lib(dcm\w+|oflog|ofstd)\.so\.\d+', 'DCMTK: DICOM medical images'),
    (r'libheif\.so\.\d+', 'libheif: HEIF and AVIF photographs'),
    (r'libraw(_r)?\.so\.\d+', 'LibRaw: camera RAW photographs'),
]
# Functions a kept library calls whenever it is loaded or unloaded, whatever the worker does:
# their placeholders return instead of ending the process: 0, or a version string.
AT_LOAD = {
    # DiRegister::DiRegister() and ~DiRegister(): DCMTK's registration object in OpenImageIO's
    # DICOM reader, a static constructor and destructor.
    '_ZN10DiRegisterC1Ev': None,
    '_ZN10DiRegisterD1Ev': None,
    # OpenImageIO lists the version of each format library as it registers its readers.
    'libraw_version': 'left out',
}
# The C library's own libraries, beside libc.so.6 (its dynamic loader is bundled separately).
GLIBC = ['libc.so.6', 'libm.so.6', 'libmvec.so.1', 'libdl.so.2', 'libpthread.so.0', 'librt.so.1',
         'libresolv.so.2', 'libutil.so.1', 'libanl.so.1', 'libnss_files.so.2',
         'libnss_dns.so.2', 'libnss_compat.so.2']


def run(*args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def left_out(soname):
    for pattern, why in LEFT_OUT:
        if re.fullmatch(pattern, soname):
            return why
    return None


def needed(path):
    return re.findall(r'\(NEEDED\)\s+Shared library: \[(.+?)\]', run('readelf', '-dW', path))


def resolved(programs):
    """soname -> file, as this machine's loader resolves the programs' libraries."""
    where = {}
    for program in programs:
        for line in run('ldd', program).splitlines():
            m = re.match(r'\s*(\S+) => (/\S+)', line)
            if m:
                where[m.group(1)] = m.group(2)
    return where


SYMBOL = re.compile(r'\s*\d+: [0-9a-f]+\s+(\d+|0x[0-9a-f]+) (\w+)\s+(\w+)\s+\w+\s+(\w+) (\S+)')


def symbols(path):
    """(name, version, type, size, bind, defined) for each dynamic symbol of `path`."""
    for line in run('readelf', '-W', '--dyn-syms', path).splitlines():
        m = SYMBOL.match(line)
        if m:
            size, kind, bind, ndx, name = m.groups()
            name, _, version = name.partition('@')
            yield name, version.lstrip('@'), kind, int(size, 0), bind, ndx != 'UND'


def needed_versions(path):
    """{soname: {version}}: the symbol versions `path` requires of each library."""
    wanted, current = collections.defaultdict(set), None
    for line in run('readelf', '-W', '-V', path).splitlines():
        m = re.search(r'File: (\S+)', line)
        if m:
            current = m.group(1)
        m = re.search(r'Name: (\S+)', line)
        if m and current:
            wanted[current].add(m.group(1))
    return wanted


def placeholder_source(soname, functions, objects):
    message = 'tessera: this bundle leaves %s out, yet its function ' % soname
    out = ['.section .note.GNU-stack,"",@progbits', '.section .rodata',
           'message: .ascii "%s"' % message, 'called: .ascii " was called\\n"', '.text',
           # write(2, message), write(2, name in rsi/rdx), write(2, called), exit_group(70)
           'absent: push %rsi', 'push %rdx', 'mov $1, %eax', 'mov $2, %edi',
           'lea message(%rip), %rsi', 'mov $%d, %%edx' % len(message), 'syscall',
           'pop %rdx', 'pop %rsi', 'mov $1, %eax', 'mov $2, %edi', 'syscall',
           'mov $1, %eax', 'mov $2, %edi', 'lea called(%rip), %rsi', 'mov $12, %edx', 'syscall',
           'mov $231, %eax', 'mov $70, %edi', 'syscall', 'hlt']
    for i, name in enumerate(functions):
        out += ['.section .rodata', 'name%d: .ascii "%s"' % (i, name), '.text',
                '.globl %s' % name, '.type %s,@function' % name, '%s:' % name]
        if name in AT_LOAD and AT_LOAD[name] is None:
            out += ['xor %eax, %eax', 'ret']
        elif name in AT_LOAD:
            out += ['lea text%d(%%rip), %%rax' % i, 'ret', '.section .rodata',
                    'text%d: .asciz "%s"' % (i, AT_LOAD[name]), '.text']
        else:
            out += ['lea name%d(%%rip), %%rsi' % i, 'mov $%d, %%edx' % len(name), 'jmp absent']
    for name, size in objects:
        out += ['.data', '.balign 16', '.globl %s' % name, '.type %s,@object' % name,
                '.size %s,%d' % (name, size), '%s: .zero %d' % (name, size)]
    return '\n'.join(out) + '\n'


def write_placeholders(lib_dir, programs, absent):
    """absent: soname -> the real library (for its symbols' types and sizes)."""
    kept = programs + [os.path.join(lib_dir, n) for n in sorted(os.listdir(lib_dir))]
    defined_by_kept, imports, versions = set(), set(), collections.defaultdict(set)
    for path in kept:
        for name, version, kind, size, bind, defined in symbols(path):
            if defined:
                defined_by_kept.add(name)
            elif bind != 'WEAK':  # a weak import may stay unresolved
                imports.add((name, version))
        for soname, names in needed_versions(path).items():
            if soname in absent:
                versions[soname] |= names
    offered = {}  # soname -> name -> version -> (type, size)
    for soname, path in absent.items():
        offered[soname] = collections.defaultdict(dict)
        for name, version, kind, size, bind, defined in symbols(path):
            if defined and kind not in ('FILE', 'SECTION', 'NOTYPE'):
                offered[soname][name][version] = (kind, size)
    wanted = collections.defaultdict(dict)  # soname -> name -> (version, type, size)
    for name, version in sorted(imports):
        if name in defined_by_kept:
            continue
        for soname in sorted(absent):
            choices = offered[soname].get(name, {})
            version = version or min(choices, default='')
            if version not in choices:
                continue
            kind, size = choices[version]
            if kind == 'TLS' or name in wanted[soname]:
                sys.exit('libraries.py: cannot stand in for %s of %s' % (name, soname))
            wanted[soname][name] = (version, kind, size)
            break
    work = tempfile.mkdtemp()
    for soname in sorted(absent):
        entries = wanted[soname]
        nodes = sorted(versions[soname] | {v for v, _, _ in entries.values() if v})
        # Unversioned imports go in the first node (ld allows no anonymous one beside others).
        unversioned = sorted(n for n, (v, _, _) in entries.items() if not v)
        script = [] if nodes else ['{ global: %s; };' % ('; '.join(unversioned) or '*')]
        for i, node in enumerate(nodes):
            names = sorted(n for n, (v, _, _) in entries.items() if v == node)
            names += unversioned if i == 0 else []
            script.append('%s { global: %s; };' % (node, '; '.join(names)) if names else
                          '%s { };' % node)
        functions = sorted(n for n, (_, k, _) in entries.items() if k not in ('OBJECT', 'COMMON'))
        objects = sorted((n, max(s, 8)) for n, (_, k, s) in entries.items()
                         if k in ('OBJECT', 'COMMON'))
        source = os.path.join(work, soname + '.s')
        version_map = os.path.join(work, soname + '.map')
        with open(source, 'w') as f:
            f.write(placeholder_source(soname, functions, objects))
        with open(version_map, 'w') as f:
            f.write('\n'.join(script) + '\n')
        run('gcc', '-shared', '-nostdlib', '-s', '-Wl,-soname,' + soname, '-Wl,--build-id=none',
            '-Wl,--version-script=' + version_map, '-o', os.path.join(lib_dir, soname), source)
    shutil.rmtree(work)
    return {s: len(wanted[s]) for s in absent}


def packages_of(paths):
    """{path: (package, version)} for the paths a Debian package installed (one query each)."""
    spellings = {}  # how dpkg may have recorded each path (merged /usr or not) -> path
    for path in paths:
        for spelling in (path, os.path.realpath(path)):
            for candidate in (spelling, spelling[4:] if spelling.startswith('/usr/') else
                              '/usr' + spelling):
                spellings.setdefault(candidate, path)
    found = subprocess.run(['dpkg-query', '-S', *sorted(spellings)], capture_output=True,
                           text=True).stdout if shutil.which('dpkg-query') else ''
    owner = {}
    for line in found.splitlines():
        package, _, file = line.partition(': ')
        if file in spellings and not line.startswith('diversion'):
            owner[spellings[file]] = package.split(':')[0]
    versions = dict(line.split(' ', 1) for line in run(
        'dpkg-query', '-W', '-f', '${Package} ${Version}\\n', *sorted(set(owner.values())))
        .splitlines()) if owner else {}
    return {path: (package, versions.get(package, '?')) for path, package in owner.items()}


def main(lib_dir, doc_dir, programs):
    where = resolved(programs)
    libc_dir = os.path.dirname(where['libc.so.6'])
    kept, absent, todo = {}, {}, [n for p in programs for n in needed(p)] + GLIBC
    while todo:
        soname = todo.pop()
        if soname in kept or soname in absent or soname.startswith('ld-linux'):
            continue
        path = where.get(soname) or os.path.join(libc_dir, soname)
        if not os.path.exists(path):
            sys.exit('libraries.py: %s is not on this machine' % soname)
        if left_out(soname):
            absent[soname] = path
            continue
        kept[soname] = path
        todo += needed(path)
    for soname, path in kept.items():
        shutil.copyfile(path, os.path.join(lib_dir, soname))
    counts = write_placeholders(lib_dir, programs, absent)

    os.makedirs(os.path.join(doc_dir, 'copyright'), exist_ok=True)
    lines = ['Libraries in lib/ (the C library and its loader included), each with the Debian',
             'package and version it was taken from:', '']
    packages = packages_of(kept.values())
    for soname, path in sorted(kept.items()):
        found = packages.get(path)
        lines.append('  %-34s %s' % (soname, '%s %s' % found if found else '(not from a package)'))
        copyright_file = '/usr/share/doc/%s/copyright' % found[0] if found else ''
        if os.path.exists(copyright_file):
            shutil.copyfile(copyright_file, os.path.join(doc_dir, 'copyright', found[0]))
    lines += ['', 'Left out: what Debian\'s OpenImageIO links for formats the worker never reads,',
              'with everything only they load. lib/ holds a placeholder under each name a kept',
              'library asks for, defining only what that library imports:', '']
    for soname in sorted(absent):
        lines.append('  %-34s %s (%d symbols)' % (soname, left_out(soname), counts[soname]))
    with open(os.path.join(doc_dir, 'libraries.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('libraries.py: %d libraries, %d placeholders' % (len(kept), len(absent)))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
