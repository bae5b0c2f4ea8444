"""Hand-written check sentences, labelled by a person, never used for training.

They answer the issue's "obvious abuse and obvious ads caught in both languages" and "clear
abuse scores higher than clear praise". Deliberately phrased unlike the training templates.
"""

from __future__ import annotations

__all__ = ["ABUSE", "ADS", "PRAISE"]

ABUSE: dict[str, tuple[str, ...]] = {
    "en": (
        "you are a fucking idiot and everyone here hates you",
        "go kill yourself you worthless piece of shit",
        "fuck off, nobody asked for your stupid opinion",
        "what a dumb bitch, uninstall the game",
        "you ugly retard, get out of this chat",
        "eat shit loser",
        "your mother is a whore",
        "i will find you and beat the crap out of you, asshole",
        "stfu you pathetic moron",
        "this guy is a complete dickhead",
    ),
    "zh": (
        "你他妈的就是个傻逼",
        "滚你妈的，没人想听你说话",
        "操你妈，垃圾东西",
        "你这个脑残，快去死吧",
        "什么玩意儿，一群废物白痴",
        "你全家都是贱人",
        "傻叉主播，赶紧下播吧",
        "妈的智障，别在这里丢人",
        "去死吧你这个混蛋",
        "贱货，滚出直播间",
    ),
}

PRAISE: dict[str, tuple[str, ...]] = {
    "en": (
        "you are amazing, thanks for the great stream",
        "this is the best video I have seen all week",
        "love your work, keep it up!",
        "what a wonderful community, everyone is so kind",
        "great play, that was really impressive",
        "thank you so much for helping me yesterday",
        "your art is beautiful",
        "congrats on the new job, well deserved",
        "such a friendly and helpful answer, thanks",
        "had a lovely time chatting with you all",
    ),
    "zh": (
        "主播太厉害了，谢谢分享",
        "这个视频真的很棒",
        "非常喜欢你的作品，加油！",
        "大家都好友善，氛围真好",
        "刚才那一波操作太精彩了",
        "谢谢你昨天的帮助",
        "画得真漂亮",
        "恭喜找到新工作，实至名归",
        "回答得很耐心，感谢",
        "今天聊得很开心",
    ),
}

ADS: dict[str, tuple[str, ...]] = {
    "en": (
        "Cheap Rolex watches for sale, order at luxury-deals.shop today!",
        "Make $3000 per week working from home, sign up at quickmoney.biz",
        "100% free Robux generator, visit robux-now.io",
        "Lowest prices on viagra, no prescription needed, buy online now",
        "Boost your channel: 10k followers for $5, DM me",
        "Exclusive crypto investment, guaranteed 300% returns, join t.me/richfast",
        "Huge sale on designer bags, click the link in my profile",
        "Get your free gift card now, limited stock, go to giftzone.xyz",
        "Best VPN deal ever, 90% off with code SAVE90",
        "Hot singles in your area, register free at meetnow.club",
    ),
    "zh": (
        "高价回收游戏账号，加微信abc123",
        "兼职刷单日赚三百，有意者联系QQ 88886666",
        "正品名牌包包一折起，点击链接购买",
        "代开各类发票，价格优惠，详询客服",
        "免费领取会员，关注公众号即可",
        "网络赚钱项目，零投入高回报，加群了解",
        "专业代练上分，包月更便宜，私聊我",
        "减肥药特价促销，一周瘦十斤",
        "低价出售游戏金币，淘宝店搜索小鱼游戏",
        "彩票内部消息，稳赚不赔，加微信",
    ),
}
