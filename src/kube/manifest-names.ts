// Which names in a manifests folder hold manifests: the folder's reader (manifests.ts) reads
// these files, and the daemon's folder watch loads the folder again only when one of these
// names changes. A module of its own: the daemon's thread loads no reader.

const MANIFEST_EXT = /\.(ya?ml|json)$/i;

/** A folder entry the reader reads: *.yaml, *.yml or *.json, not hidden. Atomic writers' temporary
 *  files are hidden or carry another suffix, so they are not read half-written. */
export function isManifestName(name: string): boolean {
  return !name.startsWith('.') && MANIFEST_EXT.test(name);
}

/** A folder event for `name` can change what the reader reads: a manifest's name, or `..data`,
 *  the symlink kubelet's atomic writer swaps to update a ConfigMap or Secret volume (its files
 *  are symlinks through `..data`, and no event names them). */
export function affectsManifests(name: string): boolean {
  return name === '..data' || isManifestName(name);
}
