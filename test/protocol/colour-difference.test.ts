/**
 * Colour difference (protocol/colour-difference.ts): CIEDE2000 against the
 * published test data of Sharma, Wu & Dalal (2005), its symmetry, the sRGB →
 * CIELAB conversion at known points, and the distances the queue's colour
 * tolerance (default ΔE 10) relies on.
 */
import t, { type Test } from 'tap'
import { deltaE2000, hexDeltaE, labOfHex, type Lab } from '../../protocol/colour-difference.js'

const lab = (L: number, a: number, b: number): Lab => ({ L, a, b })

/**
 * Golden vectors: Table 1 of Sharma, Wu & Dalal, "The CIEDE2000
 * Color-Difference Formula: Implementation Notes, Supplementary Test Data, and
 * Mathematical Observations", Color Res. Appl. 30(1), 2005 (also published as
 * ciede2000testdata.txt). Each row is L1 a1 b1, L2 a2 b2, ΔE00 to 4 decimals.
 * Pairs 7–16 probe the hue cases: a neutral colour, and hue differences on
 * either side of 180°.
 */
const sharmaPairs: readonly (readonly [Lab, Lab, number])[] = [
  [lab(50.0, 2.6772, -79.7751), lab(50.0, 0.0, -82.7485), 2.0425],
  [lab(50.0, 3.1571, -77.2803), lab(50.0, 0.0, -82.7485), 2.8615],
  [lab(50.0, 2.8361, -74.02), lab(50.0, 0.0, -82.7485), 3.4412],
  [lab(50.0, -1.3802, -84.2814), lab(50.0, 0.0, -82.7485), 1.0],
  [lab(50.0, -1.1848, -84.8006), lab(50.0, 0.0, -82.7485), 1.0],
  [lab(50.0, -0.9009, -85.5211), lab(50.0, 0.0, -82.7485), 1.0],
  [lab(50.0, 0.0, 0.0), lab(50.0, -1.0, 2.0), 2.3669],
  [lab(50.0, -1.0, 2.0), lab(50.0, 0.0, 0.0), 2.3669],
  [lab(50.0, 2.49, -0.001), lab(50.0, -2.49, 0.0009), 7.1792],
  [lab(50.0, 2.49, -0.001), lab(50.0, -2.49, 0.001), 7.1792],
  [lab(50.0, 2.49, -0.001), lab(50.0, -2.49, 0.0011), 7.2195],
  [lab(50.0, 2.49, -0.001), lab(50.0, -2.49, 0.0012), 7.2195],
  [lab(50.0, -0.001, 2.49), lab(50.0, 0.0009, -2.49), 4.8045],
  [lab(50.0, -0.001, 2.49), lab(50.0, 0.001, -2.49), 4.8045],
  [lab(50.0, -0.001, 2.49), lab(50.0, 0.0011, -2.49), 4.7461],
  [lab(50.0, 2.5, 0.0), lab(50.0, 0.0, -2.5), 4.3065],
  [lab(50.0, 2.5, 0.0), lab(73.0, 25.0, -18.0), 27.1492],
  [lab(50.0, 2.5, 0.0), lab(61.0, -5.0, 29.0), 22.8977],
  [lab(50.0, 2.5, 0.0), lab(56.0, -27.0, -3.0), 31.903],
  [lab(50.0, 2.5, 0.0), lab(58.0, 24.0, 15.0), 19.4535],
  [lab(50.0, 2.5, 0.0), lab(50.0, 3.1736, 0.5854), 1.0],
  [lab(50.0, 2.5, 0.0), lab(50.0, 3.2972, 0.0), 1.0],
  [lab(50.0, 2.5, 0.0), lab(50.0, 1.8634, 0.5757), 1.0],
  [lab(50.0, 2.5, 0.0), lab(50.0, 3.2592, 0.335), 1.0],
  [lab(60.2574, -34.0099, 36.2677), lab(60.4626, -34.1751, 39.4387), 1.2644],
  [lab(63.0109, -31.0961, -5.8663), lab(62.8187, -29.7946, -4.0864), 1.263],
  [lab(61.2901, 3.7196, -5.3901), lab(61.4292, 2.248, -4.962), 1.8731],
  [lab(35.0831, -44.1164, 3.7933), lab(35.0232, -40.0716, 1.5901), 1.8645],
  [lab(22.7233, 20.0904, -46.694), lab(23.0331, 14.973, -42.5619), 2.0373],
  [lab(36.4612, 47.858, 18.3852), lab(36.2715, 50.5065, 21.2231), 1.4146],
  [lab(90.8027, -2.0831, 1.441), lab(91.1528, -1.6435, 0.0447), 1.4441],
  [lab(90.9257, -0.5406, -0.9208), lab(88.6381, -0.8985, -0.7239), 1.5381],
  [lab(6.7747, -0.2908, -2.4247), lab(5.8714, -0.0985, -2.2286), 0.6377],
  [lab(2.0776, 0.0795, -1.135), lab(0.9033, -0.0636, -0.5514), 0.9082],
]

const describe = ([one, two]: readonly [Lab, Lab, number], index: number): string =>
  `pair ${index + 1}: (${one.L}, ${one.a}, ${one.b}) vs (${two.L}, ${two.a}, ${two.b})`

t.test('colour difference - all 34 pairs of the Sharma test data give the published ΔE00 to 4 decimals', async (t) => {
  t.equal(sharmaPairs.length, 34)
  sharmaPairs.forEach((pair, index) => {
    const [one, two, expected] = pair
    t.equal(Number(deltaE2000(one, two).toFixed(4)), expected, describe(pair, index))
  })
})

t.test('colour difference - ΔE00 is symmetric: swapping the colours changes nothing', async (t) => {
  sharmaPairs.forEach((pair, index) => {
    const [one, two] = pair
    t.ok(Math.abs(deltaE2000(one, two) - deltaE2000(two, one)) < 1e-12, describe(pair, index))
  })
  t.ok(Math.abs(hexDeltaE('#3A7BD5', '#E94E1B')! - hexDeltaE('#E94E1B', '#3A7BD5')!) < 1e-12, 'for hex colours too')
})

t.test('colour difference - a colour is at distance 0 from itself, neutral ones included', async (t) => {
  for (const [one, two] of sharmaPairs) {
    t.equal(deltaE2000(one, one), 0)
    t.equal(deltaE2000(two, two), 0)
  }
  t.equal(hexDeltaE('#808080', '#808080'), 0)
  t.equal(hexDeltaE('#000000', '000000'), 0)
})

t.test('colour difference - the parametric weights divide their term', async (t) => {
  const lighter = lab(60, 0, 0)
  const darker = lab(50, 0, 0)
  // Neutral colours differ in lightness only, so kL = 2 halves the distance.
  t.ok(Math.abs(deltaE2000(lighter, darker, 2) - deltaE2000(lighter, darker) / 2) < 1e-12)
  t.equal(deltaE2000(lighter, darker, 1, 5, 5), deltaE2000(lighter, darker), 'kC and kH do not touch a lightness difference')
})

const near = (t: Test, actual: number | undefined, expected: number, within: number, message: string): void => {
  t.ok(actual !== undefined && Math.abs(actual - expected) <= within, `${message}: ${actual} ≈ ${expected} ± ${within}`)
}

t.test('colour difference - labOfHex: white is L 100 a 0 b 0 under the D65 white point', async (t) => {
  const white = labOfHex('#FFFFFF')
  near(t, white?.L, 100, 1e-3, 'L')
  near(t, white?.a, 0, 1e-3, 'a')
  near(t, white?.b, 0, 1e-3, 'b')
})

t.test('colour difference - labOfHex: black is L 0 a 0 b 0', async (t) => {
  t.same(labOfHex('#000000'), { L: 0, a: 0, b: 0 })
})

t.test('colour difference - labOfHex: sRGB red is L 53.24 a 80.09 b 67.20', async (t) => {
  const red = labOfHex('#FF0000')
  near(t, red?.L, 53.24, 0.05, 'L')
  near(t, red?.a, 80.09, 0.05, 'a')
  near(t, red?.b, 67.2, 0.05, 'b')
})

t.test('colour difference - labOfHex reads the forms slicers and printers write, alpha ignored', async (t) => {
  const red = labOfHex('#FF0000')
  t.ok(red)
  for (const form of ['FF0000', '#ff0000', 'ff0000', '#FF0000FF', 'FF000080', '#ff000000', '  #FF0000\n', '\tff0000ff ']) {
    t.same(labOfHex(form), red, JSON.stringify(form))
  }
})

t.test('colour difference - unreadable colours are undefined', async (t) => {
  for (const bad of ['', ' ', '#', '#FFF', 'FFF', '#FFFFF', '#FFFFFFF', '#FFFFFFFFF', '##FFFFFF', '#GGGGGG', 'red', '#FF 00 00', 'rgb(255,0,0)', '0xFF0000', '#-FFFFF']) {
    t.equal(labOfHex(bad), undefined, JSON.stringify(bad))
  }
})

t.test('colour difference - hexDeltaE is undefined when either colour is unreadable', async (t) => {
  t.equal(hexDeltaE('#FF0000', '#FF00'), undefined)
  t.equal(hexDeltaE('nope', '#FF0000'), undefined)
  t.equal(hexDeltaE('', ''), undefined)
  t.type(hexDeltaE('#FF0000', 'ff0000cc'), 'number')
})

t.test('colour difference - distances the colour tolerance relies on', async (t) => {
  t.ok(hexDeltaE('#FF0000', '#FA0505')! < 3, 'two near-identical reds are under 3 apart')
  t.ok(hexDeltaE('#FFFFFF', '#F8F8F8')! < 3, 'two near-identical whites are under 3 apart')
  t.ok(hexDeltaE('#FF0000', '#FF8000')! > 10, 'red and orange are over 10 apart')
  t.ok(hexDeltaE('#0000FF', '#800080')! > 10, 'blue and purple are over 10 apart')
  t.ok(hexDeltaE('#000000', '#404040')! > 10, 'black and dark grey are over 10 apart')
  near(t, hexDeltaE('#000000', '#FFFFFF'), 100, 0.01, 'black and white are 100 apart')
})
