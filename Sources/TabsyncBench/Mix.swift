/// Relative weights of the op kinds the workload submits.
public struct Mix: Sendable, Equatable, Codable {
    public var add: Int
    public var move: Int
    public var activate: Int
    public var update: Int
    public var remove: Int

    /// Even weights: a workspace does a random walk between the bounds (20 and 200 tabs).
    public static let `default` = Mix(add: 20, move: 20, activate: 20, update: 20, remove: 20)

    public init(add: Int, move: Int, activate: Int, update: Int, remove: Int) {
        (self.add, self.move, self.activate, self.update, self.remove) = (add, move, activate, update, remove)
    }

    public var total: Int { add + move + activate + update + remove }

    public struct ParseError: Error, Sendable, Equatable {
        public var message: String
    }

    /// `add=20,move=30,...`: kinds not named keep their default weight; at least one weight must be above 0.
    public static func parse(_ text: String) throws(ParseError) -> Mix {
        var mix = Mix.default
        for part in text.split(separator: ",", omittingEmptySubsequences: true) {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard pieces.count == 2, let weight = Int(pieces[1]), (0...1_000_000).contains(weight) else {
                throw ParseError(message: "'\(part)' is not KIND=WEIGHT (a whole number 0...1000000)")
            }
            switch pieces[0] {
            case "add": mix.add = weight
            case "move": mix.move = weight
            case "activate": mix.activate = weight
            case "update": mix.update = weight
            case "remove": mix.remove = weight
            default: throw ParseError(message: "unknown op kind '\(pieces[0])' (add, move, activate, update, remove)")
            }
        }
        guard mix.total > 0 else { throw ParseError(message: "every weight is 0") }
        guard mix.add > 0 else { throw ParseError(message: "add must be above 0 (workspaces start empty)") }
        return mix
    }
}
