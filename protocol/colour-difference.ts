/**
 * How far apart two filament colours look. The print queue accepts a spool
 * whose colour is within a tolerance (default ΔE 10) of the one a job asks
 * for, so the distance has to follow what a person sees, not the hex digits:
 * Euclidean RGB, and even plain CIELAB (ΔE76), overstate differences among
 * saturated colours and understate them among blues and greys. CIEDE2000 is
 * the CIE's perceptual formula and the one colour-matching tools report.
 *
 * The formula follows Sharma, Wu & Dalal, "The CIEDE2000 Color-Difference
 * Formula: Implementation Notes, Supplementary Test Data, and Mathematical
 * Observations", Color Res. Appl. 30(1), 2005; equation numbers below are
 * theirs, and their 34 test pairs are in the tests. Colours are read as sRGB
 * (IEC 61966-2-1, D65) and converted to CIELAB with the D65 white point, XYZ
 * scaled so that Y of white is 1.
 *
 * deltaE2000 runs millions of times per matching benchmark, so it allocates
 * nothing: plain arithmetic on numbers, constants computed once.
 */

export interface Lab {
  L: number
  a: number
  b: number
}

// D65 reference white, Y = 1 scale (CIE 15, 2° observer).
const whiteX = 0.95047
const whiteY = 1
const whiteZ = 1.08883

// CIE's exact constants for the cube-root knee of L*: ε = (6/29)³, κ = (29/3)³.
const epsilon = 216 / 24389
const kappa = 24389 / 27

/** sRGB decoding of every 8-bit channel value, done once (IEC 61966-2-1 transfer function). */
const linearOfByte = new Float64Array(256)
for (let byte = 0; byte < 256; byte++) {
  const c = byte / 255
  linearOfByte[byte] = c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
}

function labF(t: number): number {
  return t > epsilon ? Math.cbrt(t) : (kappa * t + 16) / 116
}

/**
 * `#RRGGBB` or `#RRGGBBAA`, '#' optional, any case, surrounding whitespace
 * allowed (as slicers and printers write them, see slicer-metadata/colors.ts).
 * Alpha is ignored: a translucent filament is still matched on its hue.
 */
const hexColour = /^\s*#?([0-9a-fA-F]{6})(?:[0-9a-fA-F]{2})?\s*$/

/** CIELAB (D65) of an sRGB hex colour, or undefined when it is not one. */
export function labOfHex(hex: string): Lab | undefined {
  const match = hexColour.exec(hex)
  if (match === null) return undefined
  const rgb = Number.parseInt(match[1]!, 16)
  const r = linearOfByte[(rgb >> 16) & 0xff]!
  const g = linearOfByte[(rgb >> 8) & 0xff]!
  const b = linearOfByte[rgb & 0xff]!
  // Linear sRGB → XYZ (D65), the matrix of IEC 61966-2-1 at full precision.
  const x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b
  const y = 0.2126729 * r + 0.7151522 * g + 0.072175 * b
  const z = 0.0193339 * r + 0.119192 * g + 0.9503041 * b
  const fx = labF(x / whiteX)
  const fy = labF(y / whiteY)
  const fz = labF(z / whiteZ)
  return { L: 116 * fy - 16, a: 500 * (fx - fy), b: 200 * (fy - fz) }
}

const pow25To7 = 25 ** 7
const degrees = 180 / Math.PI
const radians = Math.PI / 180

/**
 * CIEDE2000 colour difference ΔE00 between two CIELAB colours; kL, kC, kH
 * are the parametric weights (1 for the reference conditions).
 */
export function deltaE2000(lab1: Lab, lab2: Lab, kL = 1, kC = 1, kH = 1): number {
  const L1 = lab1.L
  const a1 = lab1.a
  const b1 = lab1.b
  const L2 = lab2.L
  const a2 = lab2.a
  const b2 = lab2.b

  // (2)–(6): stretch a* by G so near-neutral colours get a fairer hue.
  const meanC = (Math.sqrt(a1 * a1 + b1 * b1) + Math.sqrt(a2 * a2 + b2 * b2)) / 2
  const meanC2 = meanC * meanC
  const meanC7 = meanC2 * meanC2 * meanC2 * meanC
  const G = 0.5 * (1 - Math.sqrt(meanC7 / (meanC7 + pow25To7)))
  const a1p = (1 + G) * a1
  const a2p = (1 + G) * a2
  const C1p = Math.sqrt(a1p * a1p + b1 * b1)
  const C2p = Math.sqrt(a2p * a2p + b2 * b2)

  // (7): hue angle in [0, 360); 0 by definition when a' = b = 0.
  let h1p = b1 === 0 && a1p === 0 ? 0 : Math.atan2(b1, a1p) * degrees
  if (h1p < 0) h1p += 360
  let h2p = b2 === 0 && a2p === 0 ? 0 : Math.atan2(b2, a2p) * degrees
  if (h2p < 0) h2p += 360

  // (8)–(10): differences. A neutral colour has no hue, so Δh' is 0 when either chroma is.
  const dLp = L2 - L1
  const dCp = C2p - C1p
  const chromaProduct = C1p * C2p
  let dhp = 0
  if (chromaProduct !== 0) {
    dhp = h2p - h1p
    if (dhp > 180) dhp -= 360
    else if (dhp < -180) dhp += 360
  }
  const dHp = 2 * Math.sqrt(chromaProduct) * Math.sin((dhp / 2) * radians)

  // (12)–(14): means. The mean hue goes the short way round the circle, and
  // is the plain sum when one colour is neutral (its hue counts as 0).
  const meanLp = (L1 + L2) / 2
  const meanCp = (C1p + C2p) / 2
  const hueSum = h1p + h2p
  let meanHp = hueSum
  if (chromaProduct !== 0) {
    if (Math.abs(h1p - h2p) <= 180) meanHp = hueSum / 2
    else if (hueSum < 360) meanHp = (hueSum + 360) / 2
    else meanHp = (hueSum - 360) / 2
  }

  // (15)–(22): weighting functions and the blue-region rotation term.
  const T =
    1 -
    0.17 * Math.cos((meanHp - 30) * radians) +
    0.24 * Math.cos(2 * meanHp * radians) +
    0.32 * Math.cos((3 * meanHp + 6) * radians) -
    0.2 * Math.cos((4 * meanHp - 63) * radians)
  const hueOffset = (meanHp - 275) / 25
  const dTheta = 30 * Math.exp(-hueOffset * hueOffset)
  const meanCp2 = meanCp * meanCp
  const meanCp7 = meanCp2 * meanCp2 * meanCp2 * meanCp
  const RC = 2 * Math.sqrt(meanCp7 / (meanCp7 + pow25To7))
  const lightOffset2 = (meanLp - 50) * (meanLp - 50)
  const SL = 1 + (0.015 * lightOffset2) / Math.sqrt(20 + lightOffset2)
  const SC = 1 + 0.045 * meanCp
  const SH = 1 + 0.015 * meanCp * T
  const RT = -Math.sin(2 * dTheta * radians) * RC

  const termL = dLp / (kL * SL)
  const termC = dCp / (kC * SC)
  const termH = dHp / (kH * SH)
  return Math.sqrt(termL * termL + termC * termC + termH * termH + RT * termC * termH)
}

/** ΔE00 between two sRGB hex colours, or undefined when either is unreadable. */
export function hexDeltaE(hexA: string, hexB: string): number | undefined {
  const labA = labOfHex(hexA)
  if (labA === undefined) return undefined
  const labB = labOfHex(hexB)
  if (labB === undefined) return undefined
  return deltaE2000(labA, labB)
}
